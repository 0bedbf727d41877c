package controller

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
)

// Fuzz targets: `go test -fuzz=FuzzX ./pkg/controller/` explores; plain `go test` runs the
// seeds below as regression tests.

// FuzzBuilders feeds arbitrary specs to every builder and the status computation: none
// may panic, every child carries its name, namespace and controller reference, and no
// env name appears twice in the server container.
func FuzzBuilders(f *testing.F) {
	for _, seed := range []string{
		`{"server":{"distribution":{"name":"starter"}}}`,
		`{"replicas":3,"server":{"distribution":{"image":"x:1"},"workers":4,"storage":{},"autoscaling":{"maxReplicas":2,"minReplicas":5}}}`,
		`{"server":{"distribution":{"name":"starter"},"containerSpec":{"port":9000,"env":[{"name":"HF_HOME","value":"a"},{"name":"HF_HOME","value":"b"}]},"podDisruptionBudget":{"minAvailable":"50%"}}}`,
		`{"server":{"distribution":{"name":"starter"},"podOverrides":{"serviceAccountName":"sa","volumes":[{"name":"v"}],"volumeMounts":[{"name":"v","mountPath":"/v"}]}},"network":{"exposeRoute":true,"ingress":{"host":"h","tlsSecretName":"t"},"allowedFrom":{"namespaces":["*"],"labels":["a/b"]}}}`,
		`{"replicas":0,"server":{"distribution":{},"containerSpec":{"resources":{"requests":{"cpu":"0"}}},"storage":{"size":"1Mi","accessModes":["ReadWriteMany"]}}}`,
	} {
		f.Add([]byte(seed), "cfg", "hash")
	}
	f.Fuzz(func(t *testing.T, specJSON []byte, userConfig, caHash string) {
		var spec v1alpha1.LlamaStackDistributionSpec
		if json.Unmarshal(specJSON, &spec) != nil {
			return
		}
		l := &v1alpha1.LlamaStackDistribution{
			ObjectMeta: metav1.ObjectMeta{Name: "fuzz", Namespace: "ns", UID: "uid", Generation: 1},
			Spec:       spec,
		}
		before := l.DeepCopy()
		d := newDeployment(l, deploymentInputs{image: "img", userConfigMap: userConfig, userConfigHash: "h", caBundleHash: caHash, replicas: &l.Spec.Replicas})
		children := []metav1.Object{d, newService(l), newPVC(l), newPDB(l), newIngress(l), newNetworkPolicy(l, "ops")}
		if l.Spec.Server.Autoscaling != nil {
			children = append(children, newHPA(l))
		}
		for _, c := range children {
			if c.GetName() == "" || c.GetNamespace() != "ns" || !isControlledBy(c, l) {
				t.Fatalf("%T: name %q namespace %q, controlled %v", c, c.GetName(), c.GetNamespace(), isControlledBy(c, l))
			}
		}
		seen := map[string]bool{}
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if seen[e.Name] {
				t.Fatalf("env %s appears twice", e.Name)
			}
			seen[e.Name] = true
		}
		if !equalJSON(before, l) {
			t.Fatal("a builder changed the CR")
		}
		c := &Controller{distributions: builtinDistributions(), operatorVersion: "v"}
		_ = c.calculateStatus(l, observed{deployment: d, problems: []userError{{"R", strings.Repeat("m", len(userConfig))}}}, metav1.Now())
	})
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// FuzzOperatorConfig: any ConfigMap content parses without a panic; overrides that are
// kept are valid image references.
func FuzzOperatorConfig(f *testing.F) {
	f.Add("enableNetworkPolicy:\n  enabled: true\n", "starter: quay.io/a/b:1\n")
	f.Add("[", "starter: [")
	f.Add("", "a: ''\nb: 'x y'\nc: docker.io/llamastack/distribution-starter@sha256:"+strings.Repeat("a", 64))
	f.Fuzz(func(t *testing.T, flags, overrides string) {
		cfg := parseOperatorConfig(&corev1.ConfigMap{Data: map[string]string{keyFeatureFlags: flags, keyImageOverrides: overrides}})
		for name, image := range cfg.imageOverrides {
			if !validImageReference(image) {
				t.Fatalf("override %s=%q kept but invalid", name, image)
			}
		}
		if cfg.overridesInvalid && len(cfg.imageOverrides) > 0 {
			t.Fatal("overrides kept from YAML that does not parse")
		}
	})
}

// FuzzCABundle: arbitrary ConfigMap data never panics the parser, the output is
// deterministic, and every block in it is a certificate.
func FuzzCABundle(f *testing.F) {
	cert := testCertPEMs(f, 1)[0]
	f.Add(cert, "  ", false)
	f.Add(cert+"trailing text", pemBlock("PUBLIC KEY", []byte("k")), true)
	f.Add(pemBlock("CERTIFICATE", []byte("garbage")), cert+cert, false)
	f.Fuzz(func(t *testing.T, a, b string, optional bool) {
		src := []caSource{{Namespace: "ns", Name: "ca", Data: map[string]string{"a": a, "b": b}, Optional: optional}}
		out1, n, _, err := buildCABundle(src)
		out2, _, _, _ := buildCABundle(src)
		if out1 != out2 {
			t.Fatal("not deterministic")
		}
		if err == nil && n > 0 && strings.Count(out1, "-----BEGIN CERTIFICATE-----") != n {
			t.Fatalf("%d certificates reported, %d in the bundle", n, strings.Count(out1, "-----BEGIN CERTIFICATE-----"))
		}
	})
}

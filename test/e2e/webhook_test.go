//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/conversion"
	"github.com/llamastack/llama-stack-controller/pkg/webhook"
	"github.com/llamastack/llama-stack-controller/test/localcluster"
)

// webhookTestCRD is a CRD of the controller's name, served in two versions and
// converted by a webhook at url, with no caBundle: the CertManager sets it. Its schema
// keeps anything: the CRD's own schemas are checked by hack/test-crd.sh, and this test is
// about the webhook and the conversion.
func webhookTestCRD(url string) *apiextensionsv1.CustomResourceDefinition {
	schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: ptr.To(true),
	}}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: webhook.CRDName},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "llamastack.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "llamastackdistributions", Singular: "llamastackdistribution", Kind: "LlamaStackDistribution", ListKind: "LlamaStackDistributionList",
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1alpha1", Served: true, Storage: false, Schema: schema},
				{Name: "v1alpha2", Served: true, Storage: true, Schema: schema},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ConversionReviewVersions: []string{"v1"},
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(url)},
				},
			},
		},
	}
}

// TestConversionWebhookOnARealAPIServer runs the webhook as make run will: its
// certificates kept by a CertManager with exactly artifacts/rbac/webhook_role.yaml (the
// ServiceAccount impersonated), served on loopback, and a CRD whose clientConfig.url
// points there. The CertManager creates the Secret and sets the CRD's caBundle, and
// the API server then converts through the webhook both ways: an object written in
// v1alpha1 is stored in v1alpha2 and read back in either, by the real conversion
// functions, and a v1alpha1 client's read-edit-write keeps the v1alpha2-only fields.
//
// On a control plane of its own: the suite's cluster has the real CRD, which the
// suite's controller uses.
func TestConversionWebhookOnARealAPIServer(t *testing.T) {
	ctx := context.Background()
	cluster, err := localcluster.Start(ctx, localcluster.Options{BinDir: env.binDir, StagesFile: env.stagesFile, Nodes: 1})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Errorf("stopping the webhook test's control plane: %v", err)
		}
	})
	admin := cluster.RESTConfig()
	out, err := exec.Command(filepath.Join(env.binDir, "kubectl"), "--kubeconfig", cluster.Kubeconfig(), "apply", "--server-side",
		"-f", filepath.Join(env.root, "artifacts", "controller", "namespace.yaml"),
		"-f", filepath.Join(env.root, "artifacts", "rbac", "service_account.yaml"),
		"-f", filepath.Join(env.root, "artifacts", "rbac", "webhook_role.yaml"),
		"-f", filepath.Join(env.root, "artifacts", "rbac", "webhook_role_binding.yaml")).CombinedOutput()
	require.NoError(t, err, "%s", out)

	addr, err := freeAddress()
	require.NoError(t, err)
	crds := apiextensionsclient.NewForConfigOrDie(admin).ApiextensionsV1().CustomResourceDefinitions()
	_, err = crds.Create(ctx, webhookTestCRD("https://"+addr+webhook.ConvertPath), metav1.CreateOptions{})
	require.NoError(t, err)

	// The webhook, as the controller's ServiceAccount.
	sa := rest.CopyConfig(admin)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + operatorNamespace + ":llama-stack-controller",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace, "system:authenticated"},
	}
	whCtx, cancel := context.WithCancel(klog.NewContext(ctx, klog.LoggerWithName(klog.NewKlogr(), "webhook")))
	t.Cleanup(cancel)
	certs, err := webhook.NewCertManager(webhook.CertConfig{Namespace: operatorNamespace, ExtraHosts: []string{"127.0.0.1", "localhost"}},
		kubernetes.NewForConfigOrDie(sa), apiextensionsclient.NewForConfigOrDie(sa))
	require.NoError(t, err)
	go certs.Run(whCtx)
	handler, err := webhook.NewConversionHandler(schema.GroupKind{Group: "llamastack.io", Kind: "LlamaStackDistribution"},
		conversion.Versions, webhook.ConverterFunc(conversion.Convert), 0)
	require.NoError(t, err)
	srv, err := webhook.NewServer(webhook.ServerOptions{BindAddress: addr, Certificates: certs, Handler: handler})
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(whCtx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-served) })

	eventually(t, 30*time.Second, "the webhook is ready and the CRD's caBundle set", func(ctx context.Context) (bool, error) {
		crd, err := crds.Get(ctx, webhook.CRDName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return srv.Ready() == nil && len(crd.Spec.Conversion.Webhook.ClientConfig.CABundle) > 0, nil
	})
	secret, err := kubernetes.NewForConfigOrDie(admin).CoreV1().Secrets(operatorNamespace).Get(ctx, webhook.DefaultSecretName, metav1.GetOptions{})
	require.NoError(t, err)
	crd, err := crds.Get(ctx, webhook.CRDName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, string(secret.Data["ca.crt"]), string(crd.Spec.Conversion.Webhook.ClientConfig.CABundle))

	// Written in v1alpha1, stored in v1alpha2 (a conversion by the real conversion
	// functions), read in both.
	dyn := dynamic.NewForConfigOrDie(admin)
	gvr := func(v string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "llamastack.io", Version: v, Resource: "llamastackdistributions"}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "llamastack.io/v1alpha1", "kind": "LlamaStackDistribution",
		"metadata": map[string]any{"name": "converted", "namespace": "default"},
		"spec": map[string]any{"replicas": int64(2), "server": map[string]any{
			"distribution": map[string]any{"name": "starter"},
		}},
	}}
	eventually(t, 30*time.Second, "a v1alpha1 object is created through the webhook", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(gvr("v1alpha1")).Namespace("default").Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Logf("creating: %v", err)
		}
		return err == nil, nil
	})
	v2, err := dyn.Resource(gvr("v1alpha2")).Namespace("default").Get(ctx, "converted", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "llamastack.io/v1alpha2", v2.GetAPIVersion())
	replicas, _, err := unstructured.NestedInt64(v2.Object, "spec", "workload", "replicas")
	require.NoError(t, err)
	require.Equal(t, int64(2), replicas, "v1alpha1's spec.replicas is v1alpha2's spec.workload.replicas")
	name, _, _ := unstructured.NestedString(v2.Object, "spec", "distribution", "name")
	require.Equal(t, "starter", name)
	v1, err := dyn.Resource(gvr("v1alpha1")).Namespace("default").Get(ctx, "converted", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "llamastack.io/v1alpha1", v1.GetAPIVersion())
	replicas, _, err = unstructured.NestedInt64(v1.Object, "spec", "replicas")
	require.NoError(t, err)
	require.Equal(t, int64(2), replicas)

	// Written in v1alpha2 with fields v1alpha1 has no place for; a v1alpha1 client reads,
	// edits and writes it back; the v1alpha2 fields are still there.
	raw, err := os.ReadFile(filepath.Join(env.root, "artifacts", "examples", "v1alpha2", "providers.yaml"))
	require.NoError(t, err)
	// Decoded as the API server decodes JSON (whole numbers int64), so that what comes
	// back compares equal.
	j, err := yaml.YAMLToJSON(raw)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, utiljson.Unmarshal(j, &doc))
	withProviders := &unstructured.Unstructured{Object: doc}
	withProviders.SetNamespace("default")
	_, err = dyn.Resource(gvr("v1alpha2")).Namespace("default").Create(ctx, withProviders, metav1.CreateOptions{})
	require.NoError(t, err)
	old, err := dyn.Resource(gvr("v1alpha1")).Namespace("default").Get(ctx, "providers", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, old.GetAnnotations()["llamastack.io/conversion-data"], "v1alpha1 keeps what it cannot hold")
	require.NoError(t, unstructured.SetNestedField(old.Object, int64(3), "spec", "replicas"))
	_, err = dyn.Resource(gvr("v1alpha1")).Namespace("default").Update(ctx, old, metav1.UpdateOptions{})
	require.NoError(t, err)
	after, err := dyn.Resource(gvr("v1alpha2")).Namespace("default").Get(ctx, "providers", metav1.GetOptions{})
	require.NoError(t, err)
	replicas, _, _ = unstructured.NestedInt64(after.Object, "spec", "workload", "replicas")
	assert.Equal(t, int64(3), replicas, "the v1alpha1 edit applies")
	asJSON := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}
	for _, field := range []string{"providers", "resources", "disabled"} {
		assert.JSONEq(t, asJSON(doc["spec"].(map[string]any)[field]), asJSON(after.Object["spec"].(map[string]any)[field]),
			"%s survive a v1alpha1 client's write", field)
	}
	assert.Empty(t, after.GetAnnotations()["llamastack.io/conversion-data"], "no conversion data left on the hub")
}

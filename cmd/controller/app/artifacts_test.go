package app

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const artifactsDir = "../../../artifacts"

// readArtifact decodes one file of artifacts/ strictly into obj.
func readArtifact(t *testing.T, path string, obj any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(artifactsDir, path))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(raw, obj), path)
}

// The webhook's pieces in artifacts/ name each other: the CRD's clientConfig the
// Service (the name the controller puts in its certificate), the Service the
// Deployment's container port, and that port the --webhook-bind-address.
func TestArtifactsWireTheWebhook(t *testing.T) {
	var crd apiextensionsv1.CustomResourceDefinition
	readArtifact(t, "crd/llamastack.io_llamastackdistributions.yaml", &crd)
	var svc corev1.Service
	readArtifact(t, "controller/webhook_service.yaml", &svc)
	var dep appsv1.Deployment
	readArtifact(t, "controller/deployment.yaml", &dep)

	require.NotNil(t, crd.Spec.Conversion)
	require.NotNil(t, crd.Spec.Conversion.Webhook)
	require.NotNil(t, crd.Spec.Conversion.Webhook.ClientConfig)
	ref := crd.Spec.Conversion.Webhook.ClientConfig.Service
	require.NotNil(t, ref)
	assert.Equal(t, DefaultWebhookServiceName, ref.Name)
	assert.Equal(t, svc.Name, ref.Name)
	assert.Equal(t, svc.Namespace, ref.Namespace)
	assert.Equal(t, dep.Namespace, ref.Namespace)
	require.NotNil(t, ref.Path)
	assert.Equal(t, "/convert", *ref.Path)
	require.NotNil(t, ref.Port)
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, *ref.Port, svc.Spec.Ports[0].Port)
	assert.Equal(t, dep.Spec.Selector.MatchLabels, svc.Spec.Selector, "the Service selects the controller's pods")

	require.Len(t, dep.Spec.Template.Spec.Containers, 1)
	c := dep.Spec.Template.Spec.Containers[0]
	var port *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].Name == svc.Spec.Ports[0].TargetPort.String() {
			port = &c.Ports[i]
		}
	}
	require.NotNil(t, port, "the Service's targetPort %s is a named port of the container", svc.Spec.Ports[0].TargetPort.String())
	var bind string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--webhook-bind-address="); ok {
			bind = v
		}
	}
	assert.Equal(t, ":"+strconv.Itoa(int(port.ContainerPort)), bind, "the webhook listens on the container port")
}

// The cert-manager overlay mounts the Certificate's Secret where --webhook-cert-dir
// points, certifies the Service's names, and has the CA injector fill the CRD's caBundle.
func TestCertManagerOverlay(t *testing.T) {
	dir := "overlays/cert-manager"
	var k struct {
		Resources   []string         `json:"resources"`
		Patches     []map[string]any `json:"patches"`
		APIVersion  string           `json:"apiVersion"`
		Kind        string           `json:"kind"`
		SortOptions struct {
			Order string `json:"order"`
		} `json:"sortOptions"`
	}
	readArtifact(t, filepath.Join(dir, "kustomization.yaml"), &k)
	assert.Equal(t, "legacy", k.SortOptions.Order, "the Namespace and the CRD first: one apply installs on a fresh cluster")
	var patches []string
	for _, p := range k.Patches {
		if s, ok := p["patch"].(string); ok {
			patches = append(patches, s)
		}
	}
	all := strings.Join(patches, "\n")
	assert.Contains(t, all, "--webhook-cert-mode=files")
	assert.Contains(t, all, "cert-manager.io~1inject-ca-from")

	var cert struct {
		Metadata struct{ Name, Namespace string } `json:"metadata"`
		Spec     struct {
			SecretName string   `json:"secretName"`
			DNSNames   []string `json:"dnsNames"`
		} `json:"spec"`
	}
	raw, err := os.ReadFile(filepath.Join(artifactsDir, dir, "certificate.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &cert))
	var svc corev1.Service
	readArtifact(t, "controller/webhook_service.yaml", &svc)
	assert.Contains(t, cert.Spec.DNSNames, svc.Name+"."+svc.Namespace+".svc", "the name the API server dials")
	assert.Contains(t, all, "value: "+cert.Metadata.Namespace+"/"+cert.Metadata.Name, "the CA injector reads this Certificate")

	var dep appsv1.Deployment
	readArtifact(t, filepath.Join(dir, "deployment.yaml"), &dep)
	require.Len(t, dep.Spec.Template.Spec.Volumes, 1)
	v := dep.Spec.Template.Spec.Volumes[0]
	require.NotNil(t, v.Secret)
	assert.Equal(t, cert.Spec.SecretName, v.Secret.SecretName)
	require.Len(t, dep.Spec.Template.Spec.Containers, 1)
	mounts := dep.Spec.Template.Spec.Containers[0].VolumeMounts
	require.Len(t, mounts, 1)
	assert.Equal(t, v.Name, mounts[0].Name)
	assert.Contains(t, all, "--webhook-cert-dir="+mounts[0].MountPath)
}

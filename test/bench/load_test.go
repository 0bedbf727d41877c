//go:build bench

package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller"
	clientset "github.com/llamastack/llama-stack-controller/pkg/generated/clientset/versioned"
	informers "github.com/llamastack/llama-stack-controller/pkg/generated/informers/externalversions"
)

// benchNamespaces is the number of namespaces the CRs are spread over (upstream-cost.md).
const benchNamespaces = 10

// crName is the namespace and name of the i-th CR (0-based).
func crName(i int) (namespace, name string) {
	return fmt.Sprintf("bench-%d", i%benchNamespaces), fmt.Sprintf("llsd-%03d", i)
}

// mix is what the i-th CR asks for, as in upstream-cost.md: distribution starter and
// one env var on all; storage on every 4th, autoscaling on every 5th, a PDB on every 3rd.
// Beyond upstream's mix, every optional child is on for some: the 2nd of every ten
// serves TLS and is exposed through an HTTPRoute (with its BackendTLSPolicy), the 3rd
// serves TLS and is exposed through an OpenShift Route, both with autoscaling and a PDB;
// every CR has a NetworkPolicy (turned on in the operator ConfigMap) and a
// ServiceMonitor (its server serves metrics).
type mix struct {
	storage, autoscaling, pdb bool
	// expose is "", exposeHTTPRoute or exposeRoute.
	expose string
}

const (
	exposeHTTPRoute = "httproute"
	exposeRoute     = "route"
)

func mixOf(i int) mix {
	m := mix{storage: i%4 == 0, autoscaling: i%5 == 0, pdb: i%3 == 0}
	switch i % 10 {
	case 1:
		m.expose = exposeHTTPRoute
	case 2:
		m.expose = exposeRoute
	}
	if m.expose != "" {
		m.autoscaling, m.pdb = true, true
	}
	return m
}

// expectedChildren sums the children of the first n CRs, by kind.
func expectedChildren(n int) map[string]int {
	out := map[string]int{"deployments": n, "services": n, "networkpolicies": n, "servicemonitors": n}
	for i := range n {
		m := mixOf(i)
		// A CR serving TLS runs a generated config (the starter's own names no
		// certificate); a policy's CA is a ConfigMap of its own.
		switch m.expose {
		case exposeHTTPRoute:
			out["httproutes"]++
			out["backendtlspolicies"]++
			out["configmaps"] += 2
		case exposeRoute:
			out["routes"]++
			out["configmaps"]++
		}
		if m.storage {
			out["persistentvolumeclaims"]++
		}
		if m.autoscaling {
			out["horizontalpodautoscalers"]++
		}
		if m.pdb {
			out["poddisruptionbudgets"]++
		}
	}
	return out
}

func newBenchCR(i int) *v1alpha1.LlamaStackDistribution {
	ns, name := crName(i)
	l := &v1alpha1.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.LlamaStackDistributionSpec{
			Replicas: 1,
			Server: v1alpha1.ServerSpec{
				Distribution:  v1alpha1.DistributionType{Name: "starter"},
				ContainerSpec: v1alpha1.ContainerSpec{Env: []corev1.EnvVar{{Name: "INFERENCE_MODEL", Value: "llama3.2:1b"}}},
			},
		},
	}
	m := mixOf(i)
	if m.storage {
		l.Spec.Server.Storage = &v1alpha1.StorageSpec{}
	}
	if m.autoscaling {
		l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 3}
	}
	if m.pdb {
		l.Spec.Server.PodDisruptionBudget = &v1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	}
	return l
}

// prepare creates the CRs' namespaces, each with the Gateway "gw" the HTTPRoutes
// attach to; the TLS Secret of each CR that serves TLS; and, as a provisioner would, a
// PersistentVolume pre-bound to each claim the CRs will make (the local control plane
// has none).
func prepare(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, n int) error {
	for i := range benchNamespaces {
		ns, _ := crName(i)
		if err := createNamespace(ctx, kube, ns); err != nil {
			return err
		}
		gw := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
			"metadata": map[string]any{"name": "gw", "namespace": ns},
			"spec": map[string]any{"gatewayClassName": "example", "listeners": []any{map[string]any{
				"name": "web", "port": int64(8443), "protocol": "HTTPS",
				"tls": map[string]any{"certificateRefs": []any{map[string]any{"name": "cert"}}},
			}}},
		}}
		if _, err := dyn.Resource(gatewaysResource).Namespace(ns).Create(ctx, gw, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Gateway %s/gw: %w", ns, err)
		}
	}
	for i := range n {
		if mixOf(i).expose == "" {
			continue
		}
		ns, name := crName(i)
		secret, err := servingSecret(ns, name+"-cert", name+"-service."+ns+".svc")
		if err != nil {
			return err
		}
		if _, err := kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Secret %s/%s: %w", ns, secret.Name, err)
		}
	}
	for i := range n {
		if !mixOf(i).storage {
			continue
		}
		ns, name := crName(i)
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "bench-pv-" + ns + "-" + name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns + "-" + name}},
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: name + "-pvc"},
			},
		}
		if _, err := kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating PersistentVolume %s: %w", pv.Name, err)
		}
	}
	return nil
}

func createNamespace(ctx context.Context, kube kubernetes.Interface, name string) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// exposedBenchCR is the i-th CR of a mix that exposes it, in v1alpha2 (v1alpha1 has
// neither HTTPRoutes nor Routes): serving TLS with its Secret, exposed as the mix says.
func exposedBenchCR(i int) (*v1alpha2.LlamaStackDistribution, error) {
	l := &v1alpha2.LlamaStackDistribution{}
	if err := newBenchCR(i).ConvertTo(l); err != nil {
		return nil, err
	}
	expose := &v1alpha2.ExposeSpec{Hostname: l.Name + ".example.com"}
	switch mixOf(i).expose {
	case exposeHTTPRoute:
		expose.Type = v1alpha2.ExposeHTTPRoute
		expose.HTTPRoute = &v1alpha2.HTTPRouteSpec{ParentRefs: []v1alpha2.GatewayParentRef{{Name: "gw", SectionName: "web"}}}
	case exposeRoute:
		expose.Type = v1alpha2.ExposeRoute
	}
	l.Spec.Networking = &v1alpha2.NetworkingSpec{TLS: &v1alpha2.TLSSpec{Enabled: true, SecretName: l.Name + "-cert"}, Expose: expose}
	return l, nil
}

// createCRs creates the n CRs, one writer per namespace, as a user applying them would.
func createCRs(ctx context.Context, client clientset.Interface, n int) error {
	return parallel(benchNamespaces, n, func(i int) error {
		l := newBenchCR(i)
		var err error
		if mixOf(i).expose != "" {
			var hub *v1alpha2.LlamaStackDistribution
			if hub, err = exposedBenchCR(i); err == nil {
				_, err = client.LlamastackV1alpha2().LlamaStackDistributions(l.Namespace).Create(ctx, hub, metav1.CreateOptions{})
			}
		} else {
			_, err = client.LlamastackV1alpha1().LlamaStackDistributions(l.Namespace).Create(ctx, l, metav1.CreateOptions{})
		}
		if err != nil {
			return fmt.Errorf("creating %s/%s: %w", l.Namespace, l.Name, err)
		}
		return nil
	})
}

// parallel runs do(0..n-1) on workers goroutines and returns the first error.
func parallel(workers, n int, do func(i int) error) error {
	jobs := make(chan int)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				if err := do(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return first
}

// readyWatch records when each CR first reported Ready for its current generation,
// from a watch of the driver's own.
type readyWatch struct {
	mu      sync.Mutex
	readyAt map[string]time.Time
	want    int
	last    time.Time
	all     chan struct{}
}

func watchReady(ctx context.Context, client clientset.Interface, want int) (*readyWatch, error) {
	w := &readyWatch{readyAt: map[string]time.Time{}, want: want, all: make(chan struct{})}
	factory := informers.NewSharedInformerFactory(client, 0)
	// In v1alpha2, the storage version, as kubectl reads it (the preferred version): a
	// v1alpha1 watch would have the controller's webhook convert every status update.
	inf := factory.Llamastack().V1alpha2().LlamaStackDistributions().Informer()
	observe := func(obj any) {
		l, ok := obj.(*v1alpha2.LlamaStackDistribution)
		if !ok || l.Status.ObservedGeneration != l.Generation ||
			!meta.IsStatusConditionTrue(l.Status.Conditions, v1alpha2.ConditionReady) {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		key := l.Namespace + "/" + l.Name
		if _, seen := w.readyAt[key]; seen {
			return
		}
		w.readyAt[key] = now
		w.last = now
		if len(w.readyAt) == w.want {
			close(w.all)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, n any) { observe(n) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, errors.New("the driver's watch of LlamaStackDistributions did not sync")
	}
	return w, nil
}

// wait blocks until every CR is Ready and returns when the last one became Ready.
func (w *readyWatch) wait(ctx context.Context, timeout time.Duration) (time.Time, error) {
	select {
	case <-w.all:
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.last, nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-time.After(timeout):
		w.mu.Lock()
		defer w.mu.Unlock()
		return time.Time{}, fmt.Errorf("%d of %d CRs Ready after %s", len(w.readyAt), w.want, timeout)
	}
}

// The optional kinds' resources, listed through the dynamic client.
var (
	gatewaysResource      = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}
	unstructuredResources = []schema.GroupVersionResource{
		{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"},
		{Group: "route.openshift.io", Version: "v1", Resource: "routes"},
		{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"},
		{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "backendtlspolicies"},
	}
)

// countChildren lists, in the CRs' namespaces, the objects carrying the controller's
// label and controlled by a LlamaStackDistribution, by resource.
func countChildren(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface) (map[string]int, error) {
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=" + controller.ManagedByValue}
	out := map[string]int{}
	count := func(resource string, items []metav1.Object) {
		for _, o := range items {
			if ref := metav1.GetControllerOf(o); ref != nil && ref.Kind == "LlamaStackDistribution" {
				out[resource]++
			}
		}
	}
	for i := range benchNamespaces {
		ns, _ := crName(i)
		d, err := kube.AppsV1().Deployments(ns).List(ctx, sel)
		if err != nil {
			return nil, err
		}
		count("deployments", objects(d.Items))
		s, err := kube.CoreV1().Services(ns).List(ctx, sel)
		if err != nil {
			return nil, err
		}
		count("services", objects(s.Items))
		p, err := kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, sel)
		if err != nil {
			return nil, err
		}
		count("persistentvolumeclaims", objects(p.Items))
		h, err := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, sel)
		if err != nil {
			return nil, err
		}
		count("horizontalpodautoscalers", objects(h.Items))
		b, err := kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, sel)
		if err != nil {
			return nil, err
		}
		count("poddisruptionbudgets", objects(b.Items))
		g, err := kube.NetworkingV1().Ingresses(ns).List(ctx, sel)
		if err != nil {
			return nil, err
		}
		count("ingresses", objects(g.Items))
		np, err := kube.NetworkingV1().NetworkPolicies(ns).List(ctx, sel)
		if err != nil {
			return nil, err
		}
		count("networkpolicies", objects(np.Items))
		cm, err := kube.CoreV1().ConfigMaps(ns).List(ctx, sel)
		if err != nil {
			return nil, err
		}
		count("configmaps", objects(cm.Items))
		for _, r := range unstructuredResources {
			list, err := dyn.Resource(r).Namespace(ns).List(ctx, sel)
			if err != nil {
				return nil, err
			}
			count(r.Resource, objects(list.Items))
		}
	}
	return out, nil
}

func objects[T any, PT interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = PT(&items[i])
	}
	return out
}

// servingSecret is a kubernetes.io/tls Secret as cert-manager writes it: a certificate
// for dnsName, its key, and the CA that signed it.
func servingSecret(ns, name, dnsName string) (*corev1.Secret, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench serving CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	enc := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey: enc("CERTIFICATE", der), corev1.TLSPrivateKeyKey: enc("EC PRIVATE KEY", keyDER),
			"ca.crt": enc("CERTIFICATE", caDER),
		},
	}, nil
}

// unrelatedNamespace is the namespace of the i-th unrelated object.
func unrelatedNamespace(i int) string { return fmt.Sprintf("unrelated-%d", i%benchNamespaces) }

// createUnrelated creates, in namespaces of their own, configMaps ConfigMaps of size
// bytes of data each and deployments Deployments, none of which the controller has a
// reason to read. The Deployments have no replicas, so no pod is made for them.
func createUnrelated(ctx context.Context, kube kubernetes.Interface, configMaps, size, deployments int) error {
	for i := range benchNamespaces {
		if err := createNamespace(ctx, kube, unrelatedNamespace(i)); err != nil {
			return err
		}
	}
	random := make([]byte, size/2+1)
	if _, err := rand.Read(random); err != nil {
		return err
	}
	payload := hex.EncodeToString(random)[:size]
	err := parallel(8, configMaps, func(i int) error {
		name := fmt.Sprintf("unrelated-%04d", i)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: unrelatedNamespace(i), Name: name, Labels: map[string]string{"app": "unrelated"}},
			// Every ConfigMap has content of its own.
			Data: map[string]string{"payload": name + payload[len(name):]},
		}
		_, err := kube.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("creating unrelated ConfigMaps: %w", err)
	}
	err = parallel(8, deployments, func(i int) error {
		name := fmt.Sprintf("unrelated-%04d", i)
		lbls := map[string]string{"app": name}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: unrelatedNamespace(i), Name: name, Labels: lbls},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(int32(0)),
				Selector: &metav1.LabelSelector{MatchLabels: lbls},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: lbls},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "app", Image: "registry.k8s.io/pause:3.10",
						Env: []corev1.EnvVar{{Name: "NAME", Value: name}},
					}}},
				},
			},
		}
		_, err := kube.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("creating unrelated Deployments: %w", err)
	}
	return nil
}

// touchOperatorConfig adds an annotation to the operator ConfigMap: a change that
// re-syncs every CR and changes nothing any CR depends on.
func touchOperatorConfig(ctx context.Context, kube kubernetes.Interface) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench.llamastack.io/touched":%q}}}`, time.Now().Format(time.RFC3339Nano))
	_, err := kube.CoreV1().ConfigMaps(operatorNamespace).Patch(ctx, controller.OperatorConfigMapName,
		types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

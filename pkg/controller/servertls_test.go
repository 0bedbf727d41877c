package controller

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/testcert"
	"github.com/llamastack/llama-stack-controller/pkg/controller/probe"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// testServing is a CA and a serving certificate it signed, PEM-encoded.
type testServing struct {
	ca, cert, key []byte
}

// servedOverTLS is a fixture with the CR app served over HTTPS with the certificate of
// the Secret "serving" (put in the fake API with a resourceVersion), converged.
func servedOverTLS(t *testing.T) (*fixture, testServing) {
	t.Helper()
	serving := newTestServing(t, "app-service.demo.svc")
	f := newFixture(t, newLLSD("app", withServerTLS("serving")))
	f.putSecret(serving.secret("serving"))
	f.converge("app")
	require.True(t, children.ServesTLS(f.deployment("app")))
	return f, serving
}

// newTestServing makes a CA and a serving certificate for dnsNames signed by it.
func newTestServing(t testing.TB, dnsNames ...string) testServing {
	t.Helper()
	s := testcert.NewServing(t, dnsNames...)
	return testServing{ca: s.CA, cert: s.Cert, key: s.Key}
}

// secret is the kubernetes.io/tls Secret of s, with its ca.crt.
func (s testServing) secret(name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: s.cert, corev1.TLSPrivateKeyKey: s.key, revision.SecretCAKey: s.ca},
	}
}

func withServerTLS(secret string) func(*v1alpha2.LlamaStackDistribution) {
	return func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking = &v1alpha2.NetworkingSpec{TLS: &v1alpha2.TLSSpec{Enabled: true, SecretName: secret}}
	}
}

// The pod of a TLS server mounts the Secret, is probed over HTTPS and is told where the
// certificate is in the way its line reads it.
func TestDeploymentServesTLS(t *testing.T) {
	l := newLLSD("app", withServerTLS("serving"))
	for name, tc := range map[string]struct {
		version string
		uvicorn bool
	}{
		"llama-stack 0.7": {version: "0.7.1", uvicorn: true},
		"OGX 1.3":         {version: "1.3.0"},
		"unknown line":    {version: "", uvicorn: true},
	} {
		t.Run(name, func(t *testing.T) {
			in := revision.Inputs{Image: "img", UserConfigMap: "cfg", ServerVersion: tc.version, TLS: &revision.TLS{Hash: "h1"}}
			d := children.NewDeployment(l, in)
			ctr := serverContainerOf(t, d)
			for _, p := range []*corev1.Probe{ctr.StartupProbe, ctr.ReadinessProbe, ctr.LivenessProbe} {
				assert.Equal(t, corev1.URISchemeHTTPS, p.HTTPGet.Scheme)
			}
			assert.Contains(t, ctr.VolumeMounts, corev1.VolumeMount{Name: llsd.VolumeServerTLS, MountPath: revision.ServerTLSMountPath, ReadOnly: true})
			var vol *corev1.Volume
			for i := range d.Spec.Template.Spec.Volumes {
				if d.Spec.Template.Spec.Volumes[i].Name == llsd.VolumeServerTLS {
					vol = &d.Spec.Template.Spec.Volumes[i]
				}
			}
			require.NotNil(t, vol)
			require.NotNil(t, vol.Secret)
			assert.Equal(t, "serving", vol.Secret.SecretName)
			assert.Equal(t, "h1", d.Spec.Template.Annotations[llsd.AnnotationTLSHash], "a renewed certificate rolls the pods")
			env := envMap(ctr.Env)
			if tc.uvicorn {
				assert.Equal(t, revision.ServerCertFile, env[revision.EnvUvicornCertFile])
				assert.Equal(t, revision.ServerKeyFile, env[revision.EnvUvicornKeyFile])
			} else {
				assert.NotContains(t, env, revision.EnvUvicornCertFile, "OGX reads its certificate from its config")
			}
			assert.True(t, children.ServesTLS(d))
		})
	}
	plain := children.NewDeployment(l, revision.Inputs{Image: "img"})
	assert.False(t, children.ServesTLS(plain))
	assert.Empty(t, serverContainerOf(t, plain).ReadinessProbe.HTTPGet.Scheme)
	assert.NotContains(t, plain.Spec.Template.Annotations, llsd.AnnotationTLSHash)
}

func TestServiceOfATLSServer(t *testing.T) {
	svc := children.NewService(newLLSD("app", withServerTLS("serving")), children.AskedListening(newLLSD("app", withServerTLS("serving")), ""))
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, "https", svc.Spec.Ports[0].Name)
	require.NotNil(t, svc.Spec.Ports[0].AppProtocol)
	assert.Equal(t, "https", *svc.Spec.Ports[0].AppProtocol)
	plain := children.NewService(newLLSD("app"), children.AskedListening(newLLSD("app"), ""))
	assert.Equal(t, "http", plain.Spec.Ports[0].Name)
	assert.Nil(t, plain.Spec.Ports[0].AppProtocol)
}

// A named distribution with TLS runs a generated config that names the certificate, the
// Secret mounted where it says; the status URL is https.
func TestTLSServerRunsAGeneratedConfigThatNamesTheCertificate(t *testing.T) {
	serving := newTestServing(t, "app-service.demo.svc")
	f := newFixture(t, newLLSD("app", withServerTLS("serving")), serving.secret("serving"))
	f.converge("app")
	d := f.deployment("app")
	name := mountedConfig(d)
	require.True(t, strings.HasPrefix(name, "app-config-"), "a generated config is mounted: %q", name)
	cm, err := f.kubeclient.CoreV1().ConfigMaps(testNamespace).Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	var cfg struct {
		Server map[string]any `json:"server"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(cm.Data[llsd.UserConfigKey]), &cfg))
	assert.Equal(t, revision.ServerCertFile, cfg.Server["tls_certfile"])
	assert.Equal(t, revision.ServerKeyFile, cfg.Server["tls_keyfile"])
	assert.NotContains(t, cfg.Server, "insecure", "a server with a certificate is not told to run without")
	assert.True(t, children.ServesTLS(d))
	assert.Equal(t, "https://app-service.demo.svc.cluster.local:8321", f.llsd("app").Status.ServiceURL)

	// An unchanged CR does not read the Secret again until it is due.
	assert.Empty(t, f.sync("app"))
}

// A missing Secret is reported and rolls nothing: the running Deployment is kept, and
// the Secret is not looked for again until the Secret cache holds one; then the watch
// brings the CR back and it is rolled out.
func TestMissingTLSSecretRollsNothing(t *testing.T) {
	f := newFixture(t, newLLSD("app"))
	f.converge("app")
	before := f.deployment("app")

	f.updateHub("app", withServerTLS("serving"))
	actions := f.sync("app")
	assert.Equal(t, []string{"get secrets serving", "update llamastackdistributions/status app"}, describe(actions))
	c := cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady)
	assert.Equal(t, v1alpha2.ReasonTLSSecretNotFound, c.Reason)
	assert.Contains(t, c.Message, "Secret demo/serving was not found")
	assert.Equal(t, before.Spec.Template, f.deployment("app").Spec.Template, "what runs is kept")
	assert.Contains(t, strings.Join(f.events(), "\n"), "TLSSecretNotFound")
	assert.Empty(t, f.sync("app"), "not read again while the cache has no such Secret")

	// The Secret appears: the CR is queued, and the server is rolled out serving HTTPS.
	serving := newTestServing(t, "app-service.demo.svc")
	assert.Equal(t, []cache.ObjectName{{Namespace: testNamespace, Name: "app"}}, f.secretEvent(nil, serving.secret("serving")))
	f.converge("app")
	assert.True(t, children.ServesTLS(f.deployment("app")))
	assert.NotEqual(t, v1alpha2.ReasonTLSSecretNotFound, cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Reason)
}

// secretEvent puts (or with put nil, deletes) the Secret old in the fake API and tells
// the controller's Secret handler of it as its informer would (an add without old, an
// update, a delete), and returns the CRs it queued.
func (f *fixture) secretEvent(old, put *corev1.Secret) []cache.ObjectName {
	f.t.Helper()
	require.Empty(f.t, f.queued())
	h := f.c.secretHandler()
	entry := func(s *corev1.Secret) any {
		s, err := f.kubeclient.CoreV1().Secrets(s.Namespace).Get(f.ctx, s.Name, metav1.GetOptions{})
		require.NoError(f.t, err)
		obj, err := TransformSecret(secretMetadata(s))
		require.NoError(f.t, err)
		return obj
	}
	switch {
	case put == nil:
		gone := entry(old)
		require.NoError(f.t, f.kubeclient.CoreV1().Secrets(old.Namespace).Delete(f.ctx, old.Name, metav1.DeleteOptions{}))
		f.refreshCaches()
		h.OnDelete(gone)
	case old == nil:
		f.putSecret(put)
		h.OnAdd(entry(put), false)
	default:
		was := entry(old)
		f.putSecret(put)
		h.OnUpdate(was, entry(put))
	}
	return f.queued()
}

// A deleted Secret brings its CR back at once (its watch), which reports it and keeps
// what runs; put back, it is served again. Other Secrets' changes bring no CR back.
func TestDeletedTLSSecretIsReported(t *testing.T) {
	serving := newTestServing(t, "app-service.demo.svc")
	f := newFixture(t, newLLSD("app", withServerTLS("serving")), newLLSD("plain"))
	f.putSecret(serving.secret("serving"))
	f.converge("app")
	f.converge("plain")
	running := f.deployment("app")
	require.True(t, children.ServesTLS(running))
	f.events()

	unrelated := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: testNamespace}}
	assert.Empty(t, f.secretEvent(nil, unrelated), "no CR names it")
	assert.Empty(t, f.secretEvent(unrelated, nil))

	app := cache.ObjectName{Namespace: testNamespace, Name: "app"}
	assert.Equal(t, []cache.ObjectName{app}, f.secretEvent(serving.secret("serving"), nil))
	actions := f.sync("app")
	assert.Equal(t, []string{"get secrets serving", "update llamastackdistributions/status app"}, describe(actions))
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonTLSSecretNotFound, "Secret demo/serving was not found")
	assert.Equal(t, running.Spec.Template, f.deployment("app").Spec.Template, "what runs is kept")
	assert.Equal(t, 1, countEvents(f.events(), "Warning TLSSecretNotFound"))

	assert.Equal(t, []cache.ObjectName{app}, f.secretEvent(nil, serving.secret("serving")))
	f.converge("app")
	assert.Equal(t, running.Spec.Template, f.deployment("app").Spec.Template, "the same certificate: nothing rolls")
	assert.NotEqual(t, v1alpha2.ReasonTLSSecretNotFound, cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Reason)
}

// A sync over a cached CR that has not seen the controller's last status write compares
// with what that write stored: the problem is not told again, and a status that goes back
// to what the stale copy shows (the Secret deleted, reported, then put back) is written.
func TestStatusWritesFollowTheLastWriteOnAStaleCache(t *testing.T) {
	f, serving := servedOverTLS(t)
	llsds := f.llsdInformers.Llamastack().V1alpha2().LlamaStackDistributions().Informer().GetIndexer()
	obj, exists, err := llsds.GetByKey(testNamespace + "/app")
	require.NoError(t, err)
	require.True(t, exists)
	stale := obj.(*v1alpha2.LlamaStackDistribution).DeepCopy()
	served := cond(t, stale, v1alpha2.ConditionDeploymentReady).Reason
	require.NotEqual(t, v1alpha2.ReasonTLSSecretNotFound, served)
	f.events()

	f.secretEvent(serving.secret("serving"), nil)
	require.Equal(t, []string{"get secrets serving", "update llamastackdistributions/status app"}, describe(f.sync("app")))
	require.NoError(t, llsds.Update(stale), "the informer has not seen the status write")
	assert.Empty(t, f.sync("app"), "what is stored already says it")
	assert.Equal(t, 1, countEvents(f.events(), "Warning TLSSecretNotFound"), "told once")

	f.secretEvent(nil, serving.secret("serving"))
	require.NoError(t, llsds.Update(stale), "the informer has not seen the status write")
	assert.Contains(t, describe(f.sync("app")), "update llamastackdistributions/status app")
	assert.Equal(t, served, cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Reason, "served again")
	f.converge("app")
	_, kept := f.c.statusWrites.m.Load(cache.ObjectName{Namespace: testNamespace, Name: "app"})
	assert.False(t, kept, "once the cache has the write, it is not kept")
}

// A Secret rotated (a new certificate under the same name) brings its CR back, which
// reads it and rolls the pods onto it.
func TestRotatedTLSSecretRollsOut(t *testing.T) {
	f, serving := servedOverTLS(t)
	hash := f.deployment("app").Spec.Template.Annotations[llsd.AnnotationTLSHash]
	require.NotEmpty(t, hash)

	renewed := newTestServing(t, "app-service.demo.svc")
	assert.Equal(t, []cache.ObjectName{{Namespace: testNamespace, Name: "app"}}, f.secretEvent(serving.secret("serving"), renewed.secret("serving")))
	actions := f.sync("app")
	assert.Contains(t, describe(actions), "get secrets serving")
	assert.Contains(t, describe(actions), "patch deployments app")
	f.converge("app")
	assert.NotEqual(t, hash, f.deployment("app").Spec.Template.Annotations[llsd.AnnotationTLSHash], "rolled onto the new certificate")
}

// A certificate in its last two weeks is served and told in one Warning Event, whatever
// the syncs; the CR comes back when it expires, and is then reported, what runs kept.
func TestExpiringCertificateIsToldOnce(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	notAfter := clk.Now().Add(10 * 24 * time.Hour).Truncate(time.Second)
	soon := testcert.NewServingValid(t, clk.Now().Add(-30*24*time.Hour), notAfter, "app-service.demo.svc")
	f := newFixture(t, newLLSD("app", withServerTLS("serving")))
	f.c.clock = clk
	var rechecks []time.Duration
	f.c.resolver.RecheckAfter = func(_ cache.ObjectName, d time.Duration) { rechecks = append(rechecks, d) }
	f.putSecret(testServing{ca: soon.CA, cert: soon.Cert, key: soon.Key}.secret("serving"))
	f.converge("app")
	require.True(t, children.ServesTLS(f.deployment("app")), "served")
	for range 3 {
		f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
			l.Spec.Workload.Replicas = ptr.To(ptr.Deref(l.Spec.Workload.Replicas, 1) + 1)
		})
		f.converge("app")
	}
	events := f.events()
	assert.Equal(t, 1, countEvents(events, "Warning TLSCertificateExpiring"), "%v", events)
	assert.True(t, hasEvent(events, "expires on "+notAfter.UTC().Format(time.RFC3339)), "%v", events)
	require.NotEmpty(t, rechecks)
	assert.Equal(t, notAfter.Add(time.Second).Sub(clk.Now()), rechecks[0], "back when it expires")
	running := f.deployment("app").Spec.Template

	clk.SetTime(notAfter.Add(time.Second))
	rechecks = nil
	f.converge("app")
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonTLSSecretInvalid, "expired on "+notAfter.UTC().Format(time.RFC3339), "renew the certificate")
	assert.Equal(t, running, f.deployment("app").Spec.Template, "what runs is kept")
	assert.Empty(t, rechecks, "an expired certificate brings nothing back by itself")
}

// A user-written config on a server that reads its certificate only from its config
// must name it; on llama-stack 0.3 to 0.7 the controller's script passes it.
func TestUserConfigWithTLSMustNameTheCertificate(t *testing.T) {
	serving := newTestServing(t, "app-service.demo.svc")
	withOverride := func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.OverrideConfig = &v1alpha2.OverrideConfigSpec{ConfigMapName: "cfg"}
	}
	plain := "version: 2\ndistro_name: mine\napis: [inference]\nproviders: {inference: []}\n"
	named := plain + "server:\n  tls_certfile: " + revision.ServerCertFile + "\n  tls_keyfile: " + revision.ServerKeyFile + "\n"

	f := newFixture(t, newLLSD("app", withServerTLS("serving"), withOverride),
		serving.secret("serving"), configMap(testNamespace, "cfg", map[string]string{llsd.UserConfigKey: plain}, nil))
	f.converge("app")
	c := cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady)
	assert.Equal(t, v1alpha2.ReasonConfigInvalid, c.Reason)
	assert.Contains(t, c.Message, "server 1.3.0 reads its certificate only from its config")
	assert.Contains(t, c.Message, "server.tls_certfile: "+revision.ServerCertFile)
	assert.Empty(t, f.sync("app"), "the file is not read again while it is unchanged")

	f.putConfigMap(configMap(testNamespace, "cfg", map[string]string{llsd.UserConfigKey: named}, nil))
	f.converge("app")
	assert.True(t, children.ServesTLS(f.deployment("app")))
	assert.NotEqual(t, v1alpha2.ReasonConfigInvalid, cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Reason)

	// llama-stack 0.7.1: the script's uvicorn is given the certificate; the file need not name it.
	f2 := newFixture(t, newLLSD("app", withServerTLS("serving"), withOverride),
		serving.secret("serving"), configMap(testNamespace, "cfg", map[string]string{llsd.UserConfigKey: plain}, nil),
		operatorConfigMap(map[string]string{revision.KeyImageOverrides: "starter: " + previousPin + "\n"}))
	f2.converge("app")
	ctr := serverContainerOf(t, f2.deployment("app"))
	assert.Equal(t, revision.ServerCertFile, envMap(ctr.Env)[revision.EnvUvicornCertFile])
}

// The controller's probe verifies the server's certificate against the Secret's ca.crt,
// for any of the Service's names, and refuses another CA or another name.
func TestServiceEndpointsVerifyTheServerCertificate(t *testing.T) {
	l := newLLSD("app", withServerTLS("serving"))
	for name, tc := range map[string]struct {
		names   []string
		trusted bool
		err     string
	}{
		"the short name":            {names: []string{"app-service.demo.svc"}, trusted: true},
		"the cluster-domain name":   {names: []string{"app-service.demo.svc.cluster.local"}, trusted: true},
		"another cluster domain":    {names: []string{"app-service.demo.svc.corp.example"}, trusted: true},
		"another Service's name":    {names: []string{"other-service.demo.svc"}, trusted: true, err: "not for the Service"},
		"a CA the controller lacks": {names: []string{"app-service.demo.svc"}, err: "unknown authority"},
	} {
		t.Run(name, func(t *testing.T) {
			s := newTestServing(t, tc.names...)
			pair, err := tls.X509KeyPair(s.cert, s.key)
			require.NoError(t, err)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte(`{"status":"OK"}`))
			}))
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
			srv.StartTLS()
			defer srv.Close()
			addr := srv.Listener.Addr().String()
			// Every name dials the test server.
			base := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}}}
			trust := &probe.TLS{}
			if tc.trusted {
				trust.RootCAs = s.ca
			}
			ep := probe.ServiceEndpoints(base)(probeService(l), trust)
			assert.Equal(t, "https://app-service.demo.svc:8321", ep.(interface{ String() string }).String())
			code, _, err := ep.Get(t.Context(), "/v1/health")
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, code)
		})
	}
}

func TestProxyEndpointOfATLSServer(t *testing.T) {
	proxied, err := probe.ProxyEndpoints(&rest.Config{Host: "https://127.0.0.1:6443"}, nil)
	require.NoError(t, err)
	l := newLLSD("app")
	assert.Equal(t, "/api/v1/namespaces/demo/services/https:app-service:8321/proxy",
		proxied(probeService(l), &probe.TLS{}).(interface{ String() string }).String())
	assert.Equal(t, "/api/v1/namespaces/demo/services/app-service:8321/proxy",
		proxied(probeService(l), nil).(interface{ String() string }).String())
}

// While the TLS Secret is deleted, or replaced by one that is refused, the pods keep
// serving the certificate they started with: the controller's probe keeps trusting the
// ca.crt of the last good read, so a server that still answers stays Ready.
func TestProbeKeepsTrustWhileTheTLSSecretIsRefused(t *testing.T) {
	f, serving := servedOverTLS(t)
	running := f.deployment("app")
	require.Equal(t, string(serving.ca), string(f.c.serverRoots(f.ctx, f.llsd("app"), running)))

	f.secretEvent(serving.secret("serving"), nil)
	f.converge("app")
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonTLSSecretNotFound, "was not found")
	assert.Equal(t, string(serving.ca), string(f.c.serverRoots(f.ctx, f.llsd("app"), running)), "deleted: the served certificate's CA is still trusted")

	garbage := serving.secret("serving")
	garbage.Data[revision.SecretCAKey] = []byte("garbage")
	f.secretEvent(nil, garbage)
	f.converge("app")
	requireUserError(t, f.llsd("app"), v1alpha2.ReasonTLSSecretInvalid, "ca.crt is not PEM certificates")
	assert.Equal(t, string(serving.ca), string(f.c.serverRoots(f.ctx, f.llsd("app"), running)), "refused: the served certificate's CA is still trusted")
}

// TLS turned off while a problem holds the template (a pod the API server would refuse):
// the pods kept still serve HTTPS with the certificate they started with, and the probe
// still trusts its ca.crt; once TLS is off and the plain server runs, nothing is trusted
// that is not needed.
func TestProbeKeepsTrustWhenTLSIsTurnedOffDuringAHold(t *testing.T) {
	f, serving := servedOverTLS(t)

	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) {
		l.Spec.Networking.TLS = nil
		l.Spec.Workload.Overrides = &v1alpha2.WorkloadOverrides{Volumes: []corev1.Volume{{Name: llsd.VolumeStorage,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}
	})
	f.converge("app")
	require.Equal(t, v1alpha2.ReasonResourceInvalid, cond(t, f.llsd("app"), v1alpha2.ConditionDeploymentReady).Reason)
	held := f.deployment("app")
	require.True(t, children.ServesTLS(held), "the template is held: HTTPS")
	assert.Equal(t, string(serving.ca), string(f.c.serverRoots(f.ctx, f.llsd("app"), held)), "the held pods' CA is still trusted")
	if tls := f.c.probeTLS(f.ctx, f.llsd("app"), held); assert.NotNil(t, tls, "probed over HTTPS") {
		assert.Equal(t, string(serving.ca), string(tls.RootCAs))
	}

	// The problem fixed: the plain server rolls out and is probed over HTTP.
	f.updateHub("app", func(l *v1alpha2.LlamaStackDistribution) { l.Spec.Workload.Overrides = nil })
	f.converge("app")
	plain := f.deployment("app")
	require.False(t, children.ServesTLS(plain))
	assert.Nil(t, f.c.probeTLS(f.ctx, f.llsd("app"), plain))
}

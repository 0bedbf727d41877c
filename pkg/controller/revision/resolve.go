package revision

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
)

// Revision is what the server pods are made from, as one sync resolves it from the CR
// and the caches: the image, the config mounted and its hash, the CA bundle, the
// server's certificate. A sync resolves it first (Resolver.Resolve), writes the
// ConfigMaps it mounts, then makes every child from it.
type Revision struct {
	// Config is the operator ConfigMap as the sync read it.
	Config OperatorConfig
	// img is the image the CR asks for; Image the one the pods run (a generated
	// config's own, once it is written).
	img   serverImage
	Image string
	// UserConfig is the config mounted: the user's (or its copy), or the generated
	// one; nil for the image's own.
	UserConfig *UserConfig
	// CARefs are the sources of the CA bundle; CAHash the hash of the bundle written.
	CARefs []CARef
	CAHash string
	// TLS is the server's certificate when it serves HTTPS.
	TLS *TLS
	// Gen is the generated config; nil when the CR does not ask for one.
	Gen *Generation
	// Problems are the user's problems with these inputs, in the order they are told
	// (nil entries are none).
	Problems []*fault.Problem
}

// Resolver resolves revisions. It only reads: the caches, through its funcs, and
// live GETs of what no cache holds the content of (a TLS Secret, a user or base config's content),
// each remembered per CR so that a sync of an unchanged CR sends nothing. Set its
// exported fields before the first Resolve; the memos need no setting.
type Resolver struct {
	// Client reads TLS Secrets and the content of user and base config ConfigMaps.
	Client kubernetes.Interface
	// ConfigMap reads a ConfigMap from the controller's ConfigMap cache (which keeps
	// the keys and a content hash, CacheHashAnnotation, not the data); a NotFound
	// error when there is none of that name.
	ConfigMap func(namespace, name string) (*corev1.ConfigMap, error)
	// OperatorConfig is the operator ConfigMap, parsed, as the cache holds it now.
	OperatorConfig func() OperatorConfig
	// RunningImage is the image the controller last chose for the CR's Deployment, if
	// it runs the same distribution; "" otherwise.
	RunningImage func(l *v1alpha2.LlamaStackDistribution) string
	// SecretVersion is the version (SecretVersion) of the Secret of that name in the
	// controller's cache of Secrets' metadata; "" when it holds none.
	SecretVersion func(namespace, name string) string
	// RecheckAfter brings the CR back after d (a date of its certificate).
	RecheckAfter func(key cache.ObjectName, d time.Duration)
	// Now tells the time.
	Now func() time.Time
	// Recorder records the Events of resolution (a skipped check of a user config).
	Recorder record.EventRecorder
	// Distributions maps each named distribution to its pinned image ("" when none
	// is published).
	Distributions map[string]string
	// WatchNamespace is the one namespace the controller watches; "" for all.
	WatchNamespace string

	// baseConfigs remembers, per CR, the base config last read live (baseMemo).
	baseConfigs ConfigMapReads
	// userConfigs remembers, per CR, the user config last read live, for the check
	// before a move to another server version.
	userConfigs ConfigMapReads
	// skippedChecks remembers, per CR, the user config (hash@version) whose skipped
	// check was last told in an Event.
	skippedChecks sync.Map
	// ignoredTold remembers, per CR, the user config (hash@version) whose ignored keys
	// were last judged, so that their Warning is told once.
	ignoredTold sync.Map
	// tlsSecrets remembers, per CR, the last read of its TLS Secret (tlsSecretMemo).
	tlsSecrets tlsSecretMemos
	// expiryTold remembers, per CR, the certificate (hash) whose coming expiry was last
	// told in an Event.
	expiryTold sync.Map
}

// Forget drops everything the resolver keeps for a CR that is gone.
func (r *Resolver) Forget(key cache.ObjectName) {
	r.baseConfigs.Forget(key)
	r.userConfigs.Forget(key)
	r.tlsSecrets.forget(key)
	r.expiryTold.Delete(key)
	r.skippedChecks.Delete(key)
	r.ignoredTold.Delete(key)
}

// LastTLS is the last good read of the CR's TLS Secret, for the probe's trust; nil when
// none.
func (r *Resolver) LastTLS(key cache.ObjectName) *TLS { return r.tlsSecrets.last(key) }

// Resolve resolves the CR's inputs and checks them as the server they are for would: a
// user config on the image's server version and with its TLS, a generated config. It
// writes nothing. What it finds wrong is in rev.Problems (the user's problems) and
// errs, the errors met, in the order met, for the caller to report (and retry).
func (r *Resolver) Resolve(ctx context.Context, l *v1alpha2.LlamaStackDistribution) (rev *Revision, errs []error) {
	rev = &Revision{Config: r.OperatorConfig()}
	// A spec v1alpha2's rules refuse (stored through v1alpha1) is told first; nothing
	// is generated from it.
	specProblem := specRulesProblem(l)
	img, imgProblem := r.chooseImage(l, rev.Config)
	rev.img, rev.Image = img, img.ref
	uc, ucProblem := r.resolveUserConfig(l)
	rev.UserConfig = uc
	caRefs, caProblem := r.resolveCABundle(l)
	rev.CARefs = caRefs
	serverTLS, tlsProblem, err := r.resolveServerTLS(ctx, l)
	if err != nil {
		errs = append(errs, err)
	}
	rev.TLS = serverTLS

	// A user-written config is not rolled onto a server version it does not fit.
	if imgProblem == nil && ucProblem == nil {
		var err error
		imgProblem, err = r.checkUserConfig(ctx, l, rev.Image, uc)
		errs = appendErr(errs, err)
	}
	if imgProblem == nil && ucProblem == nil && tlsProblem == nil && serverTLS != nil {
		var err error
		tlsProblem, err = r.checkUserConfigTLS(ctx, l, rev.Image, uc)
		errs = appendErr(errs, err)
	}
	// A CR that asks for a generated config runs it: the ConfigMap is mounted where a
	// user config would be, the image is the one the config was generated for. A
	// failure is a user error, so what runs is kept.
	var genProblem *fault.Problem
	if imgProblem == nil && specProblem == nil && GeneratesConfig(l) {
		var err error
		rev.Gen, err = r.generate(ctx, l, img)
		errs = appendErr(errs, err)
		if rev.Gen != nil {
			genProblem = rev.Gen.Problem
		}
	}
	rev.Problems = []*fault.Problem{specProblem, imgProblem, ucProblem, caProblem, tlsProblem, genProblem}
	return rev, errs
}

// appendErr appends err when it is not nil.
func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

// DeploymentInputs are the facts of the revision the Deployment is made of, the config
// it mounts included.
func (rev *Revision) DeploymentInputs(l *v1alpha2.LlamaStackDistribution, openShift bool) Inputs {
	in := Inputs{Image: rev.Image, CABundleHash: rev.CAHash, OpenShift: openShift,
		ServerVersion: ImageServerVersion(rev.Image), Distro: l.Spec.Distribution.Name, TLS: rev.TLS}
	if uc := rev.UserConfig; uc != nil {
		in.UserConfigMap, in.UserConfigHash = uc.MountName, uc.Hash
	}
	if g := rev.Gen; g != nil {
		in.ConfigEnv = g.Out.Env
		in.ServerVersion, in.Distro = g.Resolved.ServerVersion, g.Out.Distro
	}
	return in
}

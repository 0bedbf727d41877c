package controller

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// resolvedRevision is what the server pods are made from, as one sync resolves it from
// the CR and the caches: the image, the config mounted and its hash, the CA bundle, the
// server's certificate (the types the pods are built of are the package revision). A
// sync resolves it first, then makes every child from it.
type resolvedRevision struct {
	// cfg is the operator ConfigMap as the sync read it.
	cfg operatorConfig
	// img is the image the CR asks for; image the one the pods run (a generated
	// config's own, once it is written).
	img   serverImage
	image string
	// uc is the config mounted: the user's (or its copy), or the generated one; nil
	// for the image's own.
	uc *userConfig
	// caRefs are the sources of the CA bundle; caHash the hash of the bundle written.
	caRefs []caRef
	caHash string
	// tls is the server's certificate when it serves HTTPS.
	tls *revision.TLS
	// gen is the generated config; nil when the CR does not ask for one.
	gen *generation
	// problems are the user's problems with these inputs, in the order they are told
	// (nil entries are none).
	problems []*fault.Problem
}

// findings collects what a sync finds wrong: problems the user can act on, in the order
// they are found, and errors that are retried.
type findings struct {
	problems []fault.Problem
	errs     []error
}

// add records the problems that are not nil.
func (f *findings) add(ps ...*fault.Problem) {
	for _, p := range ps {
		if p != nil {
			f.problems = append(f.problems, *p)
		}
	}
}

// report turns a foreign object, or a child the API server rejects as invalid, into a
// problem for the user, and records other errors to be returned and retried. It tells
// whether err was a problem for the user.
func (f *findings) report(err error) bool {
	var no *children.NotOwnedError
	if errors.As(err, &no) {
		f.problems = append(f.problems, fault.Problem{Reason: v1alpha2.ReasonResourceNotOwned, Message: no.Error()})
		return true
	}
	if apierrors.IsInvalid(err) {
		f.problems = append(f.problems, fault.Problem{Reason: v1alpha2.ReasonResourceInvalid, Message: "the spec makes a child the API server rejects: " + err.Error()})
		return true
	}
	if err != nil {
		f.errs = append(f.errs, err)
	}
	return false
}

// blocked tells whether anything found so far keeps the children as they are.
func (f *findings) blocked() bool {
	return len(f.problems) > 0 || len(f.errs) > 0
}

// err is the errors to retry, joined.
func (f *findings) err() error { return errors.Join(f.errs...) }

// resolveRevision resolves the CR's inputs and checks them as the server they are for
// would: a user config on the image's server version and with its TLS, a generated
// config. It writes nothing; what it finds wrong is in rev.problems and f.
func (c *Controller) resolveRevision(ctx context.Context, l *v1alpha2.LlamaStackDistribution, f *findings) *resolvedRevision {
	rev := &resolvedRevision{cfg: c.currentOperatorConfig()}
	img, imgProblem := c.chooseImage(l, rev.cfg)
	rev.img, rev.image = img, img.ref
	uc, ucProblem := c.resolveUserConfig(l)
	rev.uc = uc
	caRefs, caProblem := c.resolveCABundle(l)
	rev.caRefs = caRefs
	serverTLS, tlsProblem, err := c.resolveServerTLS(ctx, l)
	if err != nil {
		f.errs = append(f.errs, err)
	}
	rev.tls = serverTLS

	// A user-written config is not rolled onto a server version it does not fit.
	if imgProblem == nil && ucProblem == nil {
		var err error
		imgProblem, err = c.checkUserConfig(ctx, l, rev.image, uc)
		f.report(err)
	}
	if imgProblem == nil && ucProblem == nil && tlsProblem == nil && serverTLS != nil {
		var err error
		tlsProblem, err = c.checkUserConfigTLS(ctx, l, rev.image, uc)
		f.report(err)
	}
	// A CR that asks for a generated config runs it: the ConfigMap is mounted where a
	// user config would be, the image is the one the config was generated for. A
	// failure is a user error, so what runs is kept.
	var genProblem *fault.Problem
	if imgProblem == nil && revision.GeneratesConfig(l) {
		var err error
		rev.gen, err = c.generate(ctx, l, img)
		f.report(err)
		if rev.gen != nil {
			genProblem = rev.gen.problem
		}
	}
	rev.problems = []*fault.Problem{imgProblem, ucProblem, caProblem, tlsProblem, genProblem}
	return rev
}

// writeConfigMaps writes the ConfigMaps the revision mounts (the copy of the user's
// config, the CA bundle, the generated config) when its inputs have no problem and
// nothing failed so far; the revision then names what it mounts.
func (c *Controller) writeConfigMaps(ctx context.Context, l *v1alpha2.LlamaStackDistribution, rev *resolvedRevision, f *findings) {
	for _, p := range rev.problems {
		if p != nil {
			return
		}
	}
	if len(f.errs) > 0 {
		return
	}
	copyProblem, err := c.ensureUserConfigCopy(ctx, l, rev.uc)
	f.report(err)
	var bundleProblem *fault.Problem
	rev.caHash, bundleProblem, err = c.ensureCABundle(ctx, l, rev.caRefs)
	f.report(err)
	if g := rev.gen; g != nil {
		f.report(c.ensureGeneratedConfigMap(ctx, l, g))
		rev.image = g.image
		rev.uc = &userConfig{mountName: g.configMapName(l), hash: g.out.Hash}
	}
	rev.problems = append(rev.problems, copyProblem, bundleProblem)
}

// deploymentInputs are the facts of the revision the Deployment is made of, the config
// it mounts included.
func (rev *resolvedRevision) deploymentInputs(l *v1alpha2.LlamaStackDistribution, openShift bool) revision.Inputs {
	in := revision.Inputs{Image: rev.image, CABundleHash: rev.caHash, OpenShift: openShift,
		ServerVersion: imageServerVersion(rev.image), Distro: l.Spec.Distribution.Name, TLS: rev.tls}
	if uc := rev.uc; uc != nil {
		in.UserConfigMap, in.UserConfigHash = uc.mountName, uc.hash
	}
	if g := rev.gen; g != nil {
		in.ConfigEnv = g.out.Env
		in.ServerVersion, in.Distro = g.resolved.ServerVersion, g.out.Distro
	}
	return in
}

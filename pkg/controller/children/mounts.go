package children

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// ServerMount is a volume mount of the server container and where it comes from.
type ServerMount struct {
	corev1.VolumeMount
	// what is the controller's name for one of its own mounts ("the storage volume");
	// field, when set, is the spec field that gave the path, and field1 the same field
	// in v1alpha1.
	what, field, field1 string
	// user is true for a mount of spec.workload.overrides.volumeMounts.
	user bool
}

// String describes the mount with its path as written, for messages.
func (m ServerMount) String() string {
	switch {
	case m.user:
		return fmt.Sprintf("%s (volume %q; v1alpha1 %s) at %q", m.field, m.Name, m.field1, m.MountPath)
	case m.field1 != "":
		return fmt.Sprintf("%s %q at %q (%s; v1alpha1 %s)", m.what, m.Name, m.MountPath, m.field, m.field1)
	case m.field != "":
		return fmt.Sprintf("%s %q at %q (%s)", m.what, m.Name, m.MountPath, m.field)
	}
	return fmt.Sprintf("%s %q at %q", m.what, m.Name, m.MountPath)
}

// serverMounts are the server container's volume mounts in order: the controller's
// (storage, user config, CA bundle), then the user's.
// writableTmp tells whether the server container gets a writable /tmp of its own: its
// root filesystem is read-only (workload.overrides.containerSecurityContext), and no
// volume of the user's is mounted there. OGX's CLI writes the resolved config to a
// temporary file before the server starts (tempfile.mkstemp in $TMPDIR, /tmp), so
// without it a 1.x server cannot start.
func writableTmp(l *v1alpha2.LlamaStackDistribution) bool {
	o := llsd.Overrides(l)
	if c := o.ContainerSecurityContext; c == nil || c.ReadOnlyRootFilesystem == nil || !*c.ReadOnlyRootFilesystem {
		return false
	}
	for _, m := range o.VolumeMounts {
		if path.Clean(m.MountPath) == llsd.TmpMountPath {
			return false
		}
	}
	return true
}

func serverMounts(l *v1alpha2.LlamaStackDistribution, in revision.Inputs) []ServerMount {
	storage := ServerMount{VolumeMount: corev1.VolumeMount{Name: llsd.VolumeStorage, MountPath: storageMountPath(l)}, what: "the storage volume"}
	if s := l.Spec.Workload.Storage; s != nil && s.MountPath != "" {
		storage.field, storage.field1 = "spec.workload.storage.mountPath", "spec.server.storage.mountPath"
	}
	mounts := []ServerMount{storage}
	if writableTmp(l) {
		mounts = append(mounts, ServerMount{
			VolumeMount: corev1.VolumeMount{Name: llsd.VolumeTmp, MountPath: llsd.TmpMountPath},
			what:        "the temporary directory volume",
		})
	}
	if in.UserConfigMap != "" {
		mounts = append(mounts, ServerMount{
			VolumeMount: corev1.VolumeMount{Name: llsd.VolumeUserConfig, MountPath: llsd.UserConfigMountPath, ReadOnly: true},
			what:        "the user config volume",
		})
	}
	if in.CABundleHash != "" {
		mounts = append(mounts, ServerMount{
			VolumeMount: corev1.VolumeMount{Name: llsd.VolumeCABundle, MountPath: revision.CABundleMountPath, ReadOnly: true},
			what:        "the CA bundle volume",
		})
	}
	if in.TLS != nil {
		mounts = append(mounts, ServerMount{
			VolumeMount: corev1.VolumeMount{Name: llsd.VolumeServerTLS, MountPath: revision.ServerTLSMountPath, ReadOnly: true},
			what:        "the TLS certificate volume",
			field:       "spec.networking.tls.secretName",
		})
	}
	for i, m := range llsd.Overrides(l).VolumeMounts {
		mounts = append(mounts, ServerMount{
			VolumeMount: *m.DeepCopy(),
			field:       fmt.Sprintf("spec.workload.overrides.volumeMounts[%d]", i),
			field1:      fmt.Sprintf("spec.server.podOverrides.volumeMounts[%d]", i),
			user:        true,
		})
	}
	return mounts
}

// sameMountPath returns the first two mounts whose paths name the same directory
// (/data, /data/, /data/. and //data are one), or ok false.
func sameMountPath(mounts []ServerMount) (first, second ServerMount, ok bool) {
	seen := make(map[string]int, len(mounts))
	for i, m := range mounts {
		p := path.Clean(m.MountPath)
		if j, dup := seen[p]; dup {
			return mounts[j], m, true
		}
		seen[p] = i
	}
	return ServerMount{}, ServerMount{}, false
}

// MountNesting is a mount (Inner) inside the directory of another (Outer): container
// runtimes mount the outer one first, so the inner volume hides the outer volume's
// files at Hidden, the inner path relative to the outer one.
type MountNesting struct {
	Outer, Inner ServerMount
	Hidden       string
}

func (n MountNesting) String() string {
	return fmt.Sprintf("%s hides the path %q inside %s", n.Inner, n.Hidden, n.Outer)
}

// nestedMounts finds, for each mount, the innermost other mount whose directory holds
// it, in the order of the mounts. Only nestings that involve a mount of the controller
// are reported: how the user nests their own volumes is their choice. Mounts at the
// same directory are not nestings (sameMountPath reports them).
func nestedMounts(mounts []ServerMount) []MountNesting {
	var out []MountNesting
	for _, inner := range mounts {
		in := path.Clean(inner.MountPath)
		var outer *ServerMount
		outerPath := ""
		for j := range mounts {
			p := path.Clean(mounts[j].MountPath)
			if p == in || !pathContains(p, in) {
				continue
			}
			// The innermost holder; of two at one directory, the later one.
			if outer == nil || len(p) >= len(outerPath) {
				outer, outerPath = &mounts[j], p
			}
		}
		if outer == nil || (outer.user && inner.user) {
			continue
		}
		out = append(out, MountNesting{
			Outer:  *outer,
			Inner:  inner,
			Hidden: strings.TrimPrefix(strings.TrimPrefix(in, outerPath), "/"),
		})
	}
	return out
}

// pathContains tells whether the cleaned path dir is a parent directory of the
// cleaned path p (not p itself).
func pathContains(dir, p string) bool {
	if dir == "/" {
		return p != "/" && strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, dir+"/")
}

// mountPathConflict reports two volumes mounted at the same directory of the server
// container. The API server compares mount paths as strings, so it accepts /.llama and
// /.llama/ side by side; the runtime then mounts both at one directory and one
// volume silently hides the other.
func mountPathConflict(mounts []ServerMount) *fault.Problem {
	first, second, ok := sameMountPath(mounts)
	if !ok {
		return nil
	}
	return &fault.Problem{Reason: v1alpha2.ReasonResourceInvalid, Message: fmt.Sprintf(
		"two volumes would be mounted at one directory, %s, of the server container: %s and %s; mount one of them elsewhere (spec.workload.storage.mountPath or spec.workload.overrides.volumeMounts; v1alpha1 spec.server.storage.mountPath or spec.server.podOverrides.volumeMounts)",
		path.Clean(second.MountPath), first, second)}
}

// NestedMountsMessage is the message of the VolumeMountWarning condition; "" when no
// mount hides part of another volume.
func NestedMountsMessage(nested []MountNesting) string {
	if len(nested) == 0 {
		return ""
	}
	parts := make([]string, len(nested))
	for i, n := range nested {
		parts[i] = n.String()
	}
	return strings.Join(parts, "; ") +
		". The pod runs, but the server does not see what the outer volume holds at that path; mount the inner volume elsewhere if those files are needed"
}

// PodNestedMounts are the nested mounts of the server container as NewDeployment
// builds it (see PodConflict).
func PodNestedMounts(l *v1alpha2.LlamaStackDistribution, in revision.Inputs) []MountNesting {
	return nestedMounts(serverMounts(l, in))
}

package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	appsac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// Automatic rollback (spec.workload.rollback). The inputs of a rollout are the pod
// template the controller makes of the CR (image, config, env, mounts): when the
// Deployment runs the current inputs and their rollout fails (a pod of its current
// ReplicaSet crash-loops, or the Deployment exceeds its progress deadline), the pod
// template of the last ReplicaSet that served (status.rollback.servedReplicaSet) is put
// back in one write, together with AnnotationRolledBack naming the failed inputs. While
// the CR's inputs are those, the controller keeps the template as it is; once they
// change, it rolls forward. The generated config the old ReplicaSet mounts is kept
// (deleteUnusedGeneratedConfigMaps keeps what a ReplicaSet mounts).

// AnnotationRolledBack on the Deployment records the rollout that failed and was rolled
// back (a Record in JSON). It is written in the rollback's own write, so that
// the failed inputs are never tried again because a status write was lost.
const AnnotationRolledBack = "llamastack.io/rolled-back"

// RollbackAfterRestarts is how often a container of a new pod Restarts in a crash loop
// before its rollout is taken for failed: a server that fails once at start (a
// dependency not up yet) is given its back-off, one that keeps failing is not.
const RollbackAfterRestarts = 3

// Record is the content of AnnotationRolledBack.
type Record struct {
	Inputs     string      `json:"inputs"`
	ReplicaSet string      `json:"replicaSet,omitempty"`
	Reason     string      `json:"reason,omitempty"`
	Message    string      `json:"message,omitempty"`
	Time       metav1.Time `json:"time"`
}

// Outcome is what planning the Deployment (Apply) found and did about rollback.
type Outcome struct {
	// Status is status.rollback to report (nil: nothing to report).
	Status *v1alpha2.RollbackStatus
	// Held: the CR's inputs are those rolled back; the Deployment keeps what it runs.
	Held bool
	// RolledBack is set when this sync rolled back.
	RolledBack bool
	// Note says why a failed rollout was not rolled back ("" when it was, or need not be).
	Note string
}

// Enabled tells whether automatic rollback is on for the CR (the default).
func Enabled(l *v1alpha2.LlamaStackDistribution) bool {
	r := l.Spec.Workload.Rollback
	return r == nil || r.Enabled == nil || *r.Enabled
}

// rotating are the pod template annotations that carry a hash of content that rotates
// under an unchanged spec, each with the volume that content reaches the pods through:
// a renewed certificate, new certificates in the CA bundle. They roll the pods, but
// they are not what the user asked for.
var rotating = []struct{ annotation, volume string }{
	{llsd.AnnotationTLSHash, llsd.VolumeServerTLS},
	{llsd.AnnotationCABundleHash, llsd.VolumeCABundle},
}

// InputsHash is the hash of a pod template the controller makes, without the content
// that rotates: the identity of a rollout's inputs, what the user asked for, so that a
// renewal does not make failed inputs new.
func InputsHash(t *corev1.PodTemplateSpec) string {
	t = t.DeepCopy()
	for _, r := range rotating {
		delete(t.Annotations, r.annotation)
	}
	return TemplateContentHash(t)
}

// TemplateContentHash is the hash of a whole pod template. Releases before InputsHash
// left out the rotating content recorded this as the failed inputs.
func TemplateContentHash(t *corev1.PodTemplateSpec) string {
	raw, err := json.Marshal(t)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:10])
}

// renewRotating brings into held, the template a rollback holds, the rotating hashes of
// made, the template of the current inputs, where both read that content through the
// same volume: the served pods then roll with the new certificate, as they would have
// without the rollback.
func renewRotating(held, made *corev1.PodTemplateSpec) {
	volume := func(t *corev1.PodTemplateSpec, name string) *corev1.Volume {
		for i := range t.Spec.Volumes {
			if t.Spec.Volumes[i].Name == name {
				return &t.Spec.Volumes[i]
			}
		}
		return nil
	}
	for _, r := range rotating {
		hv, mv := volume(held, r.volume), volume(made, r.volume)
		hash, ok := made.Annotations[r.annotation]
		if hv == nil || mv == nil || !ok || held.Annotations[r.annotation] == "" || !equality.Semantic.DeepEqual(hv, mv) {
			continue
		}
		held.Annotations[r.annotation] = hash
	}
}

// WriteRecord writes rec into d's AnnotationRolledBack.
func WriteRecord(d *appsv1.Deployment, rec *Record) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("writing the rollback record: %w", err)
	}
	d.Annotations[AnnotationRolledBack] = string(raw)
	return nil
}

// ReadRollbackRecord is the Deployment's rollback record, or nil.
func ReadRollbackRecord(d *appsv1.Deployment) *Record {
	if d == nil || d.Annotations[AnnotationRolledBack] == "" {
		return nil
	}
	var r Record
	if err := json.Unmarshal([]byte(d.Annotations[AnnotationRolledBack]), &r); err != nil || r.Inputs == "" {
		return nil
	}
	return &r
}

// deploymentReplicaSets are the cached ReplicaSets the Deployment controls (by UID),
// by name, and its current one (the Deployment's revision), nil when not known yet.
func (r *Rollouts) deploymentReplicaSets(l *v1alpha2.LlamaStackDistribution, dep *appsv1.Deployment) (map[string]*appsv1.ReplicaSet, *appsv1.ReplicaSet) {
	rss, err := r.ReplicaSets.ReplicaSets(l.Namespace).List(labels.Everything())
	if err != nil {
		return nil, nil
	}
	owned := map[string]*appsv1.ReplicaSet{}
	var current *appsv1.ReplicaSet
	revision := dep.Annotations[RevisionAnnotation]
	for _, rs := range rss {
		if ref := metav1.GetControllerOfNoCopy(rs); ref != nil && ref.Kind == "Deployment" && ref.UID == dep.UID {
			owned[rs.Name] = rs
			if revision != "" && rs.Annotations[RevisionAnnotation] == revision {
				current = rs
			}
		}
	}
	return owned, current
}

// ServedReplicaSet is the Deployment's current ReplicaSet when the Deployment has rolled
// it out to all its replicas (at least one), all available; "" otherwise.
func ServedReplicaSet(dep *appsv1.Deployment, current *appsv1.ReplicaSet) string {
	if current == nil || dep.Spec.Replicas == nil || *dep.Spec.Replicas < 1 {
		return ""
	}
	if _, reason, _ := Progress(dep, nil); reason != v1alpha2.ReasonRolloutComplete {
		return ""
	}
	return current.Name
}

// rolloutFailure is why the rollout of a ReplicaSet failed.
type rolloutFailure struct {
	Reason, Message string
}

// failedRollout tells why the rollout of the Deployment's current ReplicaSet failed, or
// nil while it has not: a pod of it crash-looping (RollbackAfterRestarts), or the
// Deployment's progress deadline exceeded, told by a stuck pod's own reason when one has.
func (r *Rollouts) failedRollout(l *v1alpha2.LlamaStackDistribution, dep *appsv1.Deployment, current *appsv1.ReplicaSet) *rolloutFailure {
	if current == nil || dep.Status.ObservedGeneration < dep.Generation || r.Pods == nil {
		return nil
	}
	pods, err := r.Pods.Pods(l.Namespace).List(labels.SelectorFromSet(labels.Set{llsd.LabelInstance: l.Name}))
	if err != nil {
		return nil
	}
	SortOldestFirst(pods)
	var stuck *PodProblem
	for _, p := range pods {
		if ref := metav1.GetControllerOfNoCopy(p); ref == nil || ref.Kind != "ReplicaSet" || ref.UID != current.UID {
			continue
		}
		pr := ProblemOf(p)
		if pr == nil {
			continue
		}
		if pr.Reason == v1alpha2.ReasonCrashLoopBackOff && Restarts(p) >= RollbackAfterRestarts {
			return &rolloutFailure{Reason: pr.Reason, Message: pr.Message}
		}
		if stuck == nil {
			stuck = pr
		}
	}
	if cond := DeploymentCondition(dep, appsv1.DeploymentProgressing); cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == v1alpha2.ReasonProgressDeadlineExceeded {
		if stuck != nil {
			return &rolloutFailure{Reason: stuck.Reason, Message: stuck.Message + " (past the Deployment's progress deadline)"}
		}
		return &rolloutFailure{Reason: v1alpha2.ReasonProgressDeadlineExceeded, Message: "the Deployment stopped making progress: " + cond.Message}
	}
	return nil
}

// Restarts is the most restarts of one of the pod's containers.
func Restarts(p *corev1.Pod) int32 {
	n := int32(0)
	for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		n = max(n, s.RestartCount)
	}
	return n
}

// SortOldestFirst sorts pods by creation, then name.
func SortOldestFirst(pods []*corev1.Pod) {
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return strings.Compare(a.Name, b.Name)
		}
		if a.CreationTimestamp.Before(&b.CreationTimestamp) {
			return -1
		}
		return 1
	})
}

// ConfigVolume is the ConfigMap the pod template mounts as the server's config, and the
// hash of its content the template carries.
func ConfigVolume(t *corev1.PodTemplateSpec) (name, hash string) {
	for _, v := range t.Spec.Volumes {
		if v.Name == llsd.VolumeUserConfig && v.ConfigMap != nil {
			return v.ConfigMap.Name, t.Annotations[llsd.AnnotationUserConfigHash]
		}
	}
	return "", ""
}

// unrestorable says why going back to the served ReplicaSet would not put back what
// served, or "": a config changed inside a ConfigMap that keeps no earlier content (the
// user's own, or the copy of one from another namespace), which the pods of the old
// template would read as it is now.
func unrestorable(l *v1alpha2.LlamaStackDistribution, dep *appsv1.Deployment, served *appsv1.ReplicaSet) string {
	name, hash := ConfigVolume(&dep.Spec.Template)
	servedName, servedHash := ConfigVolume(&served.Spec.Template)
	if name != "" && name == servedName && hash != servedHash && !llsd.IsGeneratedConfigMapName(l, name) {
		return fmt.Sprintf("the config changed inside ConfigMap %s, which keeps no earlier content to go back to; put back its previous content, or fix it", name)
	}
	return ""
}

// Apply decides what planDeployment applies, given desired, the Deployment
// made of the CR's inputs, and cur, the Deployment as cached: desired itself; the
// template the Deployment runs, while the inputs are those rolled back; or the template
// of the ReplicaSet that last served, when the rollout of these inputs failed.
func (r *Rollouts) Apply(ctx context.Context, l *v1alpha2.LlamaStackDistribution, cur *appsv1.Deployment, found bool, desired *appsv1.Deployment, out *Outcome) (*appsv1.Deployment, error) {
	st := &v1alpha2.RollbackStatus{}
	if l.Status.Rollback != nil {
		st.ServedReplicaSet = l.Status.Rollback.ServedReplicaSet
	}
	out.Status = st
	defer func() {
		if *out.Status == (v1alpha2.RollbackStatus{}) {
			out.Status = nil
		}
	}()
	if !found {
		st.ServedReplicaSet = ""
		return desired, nil
	}
	owned, current := r.deploymentReplicaSets(l, cur)
	if served := ServedReplicaSet(cur, current); served != "" {
		st.ServedReplicaSet = served
	}
	if !Enabled(l) {
		return desired, nil
	}
	// Most syncs find neither a record of a rollback nor a failing rollout: they read
	// no more (the hash and our fields of the Deployment cost as much as the rest of
	// the sync).
	rec := ReadRollbackRecord(cur)
	failure := r.failedRollout(l, cur, current)
	if rec == nil && failure == nil {
		return desired, nil
	}
	hash := InputsHash(&desired.Spec.Template)
	ours, err := r.Extract(cur, llsd.FieldManager)
	if err != nil {
		return nil, fmt.Errorf("extracting our fields of Deployment %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	if rec != nil && (rec.Inputs == hash || rec.Inputs == TemplateContentHash(&desired.Spec.Template)) {
		return holdRollback(cur, ours, desired, rec, hash, out)
	}

	// Does the Deployment run these inputs, and has their rollout failed?
	ac, err := children.ToApplyConfiguration[appsac.DeploymentApplyConfiguration](desired)
	if err != nil {
		return nil, err
	}
	if failure == nil || ours.Spec == nil || ac.Spec == nil || !equality.Semantic.DeepEqual(ours.Spec.Template, ac.Spec.Template) {
		return desired, nil
	}
	target := st.ServedReplicaSet
	if target == "" || target == current.Name {
		// Nothing served before these inputs, or what served is what fails now (not a
		// change of the CR's): there is nothing to go back to.
		return desired, nil
	}
	served := owned[target]
	if served == nil {
		out.Note = fmt.Sprintf("not rolled back: ReplicaSet %s, the last that served, is not there", target)
		return desired, nil
	}
	if why := unrestorable(l, cur, served); why != "" {
		out.Note = "not rolled back: " + why
		return desired, nil
	}
	// Its pods would wait for ever for an object that is gone: with Recreate, nothing
	// would serve. The ConfigMaps its cached volumes name are checked before any read.
	if gone, err := r.missingRef(ctx, l.Namespace, &served.Spec.Template, false); err != nil || gone != nil {
		return desired, goneNote(out, gone, target, err)
	}
	rb := Record{Inputs: hash, ReplicaSet: current.Name, Reason: failure.Reason, Message: failure.Message}
	return r.rollBack(ctx, l, cur, target, desired, rb, out)
}

// holdRollback keeps what the Deployment runs while the CR's inputs are those rec
// rolled back, and the record with it; hash is the inputs' hash.
func holdRollback(cur *appsv1.Deployment, ours *appsac.DeploymentApplyConfiguration, desired *appsv1.Deployment, rec *Record, hash string, out *Outcome) (*appsv1.Deployment, error) {
	// Read into a template of its own: decoded into desired's, JSON would merge the
	// served template into the failed one (maps, structs, list elements).
	if ours.Spec != nil && ours.Spec.Template != nil {
		var held corev1.PodTemplateSpec
		if err := fromApplyConfiguration(ours.Spec.Template, &held); err != nil {
			return nil, fmt.Errorf("reading our pod template of Deployment %s/%s: %w", cur.Namespace, cur.Name, err)
		}
		renewRotating(&held, &desired.Spec.Template)
		desired.Spec.Template = held
	}
	desired.Annotations[AnnotationRolledBack] = cur.Annotations[AnnotationRolledBack]
	if rec.Inputs != hash {
		// A record of an earlier release, which hashed the rotating content too: it
		// is written again keyed on the inputs alone, so that a renewal keeps it.
		rec.Inputs = hash
		if err := WriteRecord(desired, rec); err != nil {
			return nil, err
		}
	}
	out.Held = true
	out.Status.FailedInputs, out.Status.FailedReplicaSet, out.Status.Reason, out.Status.Message = rec.Inputs, rec.ReplicaSet, rec.Reason, rec.Message
	out.Status.LastRollbackTime = rec.Time.DeepCopy()
	return desired, nil
}

// rollBack puts the template of ReplicaSet target, the last that served, into desired,
// with rec, the record of the failed rollout; the template is read live (the cache keeps
// of a ReplicaSet only its config volumes), and checked for objects that are gone.
func (r *Rollouts) rollBack(ctx context.Context, l *v1alpha2.LlamaStackDistribution, cur *appsv1.Deployment, target string, desired *appsv1.Deployment, rec Record, out *Outcome) (*appsv1.Deployment, error) {
	rs, err := r.Client.AppsV1().ReplicaSets(l.Namespace).Get(ctx, target, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		out.Note = fmt.Sprintf("not rolled back: ReplicaSet %s, the last that served, is not there", target)
		return desired, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting ReplicaSet %s/%s to roll back to: %w", l.Namespace, target, err)
	}
	if ref := metav1.GetControllerOfNoCopy(rs); ref == nil || ref.UID != cur.UID {
		out.Note = fmt.Sprintf("not rolled back: ReplicaSet %s is no longer the Deployment's", target)
		return desired, nil
	}
	if gone, err := r.missingRef(ctx, l.Namespace, &rs.Spec.Template, true); err != nil || gone != nil {
		return desired, goneNote(out, gone, target, err)
	}
	tmpl := rs.Spec.Template.DeepCopy()
	delete(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	desired.Spec.Template = *tmpl
	rec.Time = metav1.NewTime(r.Now())
	if err := WriteRecord(desired, &rec); err != nil {
		return nil, err
	}
	out.Held, out.RolledBack = true, true
	st := out.Status
	st.FailedInputs, st.FailedReplicaSet, st.Reason, st.Message = rec.Inputs, rec.ReplicaSet, rec.Reason, rec.Message
	st.LastRollbackTime = rec.Time.DeepCopy()
	klog.FromContext(ctx).Info("Rolling back a failed rollout", "deployment", klog.KObj(cur),
		"failedReplicaSet", rec.ReplicaSet, "to", target, "reason", rec.Reason)
	return desired, nil
}

// goneNote says, in out, that the rollback to ReplicaSet target is not made because
// gone no longer exists; err is returned as it is.
func goneNote(out *Outcome, gone *TemplateRef, target string, err error) error {
	if err == nil {
		out.Note = fmt.Sprintf("not rolled back: %s, which ReplicaSet %s needs, no longer exists; create it again to allow the rollback, or fix the change", gone, target)
	}
	return err
}

// rollbackWrite is a rollback's write of a Deployment, kept until the cache has it.
type rollbackWrite struct {
	// uid and before are the Deployment's UID and resourceVersion as cached when the
	// rollback was written.
	uid     types.UID
	before  string
	written *appsv1.Deployment
}

// Remember keeps written, the Deployment a rollback of l wrote over before (as cached),
// until the cache has it (SinceCached).
func (r *Rollouts) Remember(l *v1alpha2.LlamaStackDistribution, before, written *appsv1.Deployment) {
	r.written.Store(cache.MetaObjectToName(l), rollbackWrite{uid: before.UID, before: before.ResourceVersion, written: written})
}

// Remembered tells whether a rollback of the CR of key is kept until the cache has it.
func (r *Rollouts) Remembered(key cache.ObjectName) bool {
	_, ok := r.written.Load(key)
	return ok
}

// Forget drops what is kept for the CR of key.
func (r *Rollouts) Forget(key cache.ObjectName) {
	r.written.Delete(key)
}

// SinceCached is cur, the CR's Deployment as cached, or the Deployment a
// rollback of this controller wrote after it when the cache has not seen that write
// yet: a pod event can bring the CR back first, and the rollback it would see again
// (the failed template, a crash-looping pod) must not be made, told and counted twice.
func (r *Rollouts) SinceCached(l *v1alpha2.LlamaStackDistribution, cur *appsv1.Deployment, found bool) *appsv1.Deployment {
	key := cache.MetaObjectToName(l)
	v, ok := r.written.Load(key)
	if !ok {
		return cur
	}
	w := v.(rollbackWrite)
	// The annotation too, for a store that does not version what it keeps.
	if found && cur.UID == w.uid && cur.ResourceVersion == w.before &&
		cur.Annotations[AnnotationRolledBack] != w.written.Annotations[AnnotationRolledBack] {
		return w.written
	}
	r.written.Delete(key)
	return cur
}

// fromApplyConfiguration reads an apply configuration into the typed object of its kind.
func fromApplyConfiguration(ac, into any) error {
	raw, err := json.Marshal(ac)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

// RolledBackMessage is the Progressing message while a rollback holds.
func RolledBackMessage(st *v1alpha2.RollbackStatus) string {
	msg := "Rolled back to ReplicaSet " + st.ServedReplicaSet + ", the last that served"
	if st.ServedReplicaSet == "" {
		msg = "Rolled back to the last ReplicaSet that served"
	}
	if st.FailedReplicaSet != "" {
		msg += ": the rollout of ReplicaSet " + st.FailedReplicaSet + " failed"
	}
	if st.Message != "" {
		msg += " (" + st.Message + ")"
	}
	return msg + ". The same image, config and env are not rolled out again until the spec changes (spec.workload.rollback)"
}

package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/klog/v2"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
)

// Write strategy (see docs/design.md, "How the controller writes"):
//
// Every child is written with server-side apply from its first write, by one field
// manager, with Force. Before applying, the object is looked up in the informer cache
// (and, when the cache does not have it, once live: the child informers only see
// labelled objects). An object that exists but is not controlled by this CR, checked
// by Kind and UID, is never written: it is reported instead. An apply is sent only when
// what we would apply differs from what our manager owns in the live object
// (Extract<Kind>), so a sync of an unchanged CR sends nothing, fields we stop setting
// are removed by the API server, and fields owned by others survive.

// childKind binds the typed client, lister and apply-configuration functions of one
// owned kind, so that one generic implementation ensures and deletes every child.
type childKind[T metav1.Object, AC any] struct {
	kind string
	// recorder records the Events of its writes (one per write when the sync keeps no
	// write log, see childWritten).
	recorder record.EventRecorder
	// cached reads the informer cache.
	cached func(namespace, name string) (T, error)
	// live reads the API server; used only when the cache misses.
	live func(ctx context.Context, namespace, name string) (T, error)
	// extract returns the fields the named manager owns in obj.
	extract func(obj T, fieldManager string) (*AC, error)
	apply   func(ctx context.Context, namespace string, ac *AC, opts metav1.ApplyOptions) (T, error)
	delete  func(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
	// patch sends a JSON patch (used once per object, to take it over from the operator
	// that made it); nil for kinds never taken over.
	patch func(ctx context.Context, namespace, name string, data []byte, opts metav1.PatchOptions) (T, error)
}

// isControlledBy reports whether obj's controller reference points at l, by Kind and UID.
func isControlledBy(obj metav1.Object, l *v1alpha2.LlamaStackDistribution) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.Kind == llsd.ControllerKind.Kind && ref.UID == l.UID
}

// current returns the existing object of that name, from the cache or, on a miss, live.
// found is false when it does not exist.
func (k *childKind[T, AC]) current(ctx context.Context, namespace, name string) (obj T, found bool, err error) {
	obj, err = k.cached(namespace, name)
	if err == nil {
		return obj, true, nil
	}
	if !apierrors.IsNotFound(err) {
		return obj, false, err
	}
	obj, err = k.live(ctx, namespace, name)
	if apierrors.IsNotFound(err) {
		return obj, false, nil
	}
	if err != nil {
		return obj, false, fmt.Errorf("getting %s %s/%s: %w", k.kind, namespace, name, err)
	}
	return obj, true, nil
}

// lookUp is the lookup ensureWith starts with, and the take-over of an object of the
// CR's made by the upstream operator, for a caller that decides what to apply from
// what it finds before it writes (ensureOptions.looked).
func (k *childKind[T, AC]) lookUp(ctx context.Context, l *v1alpha2.LlamaStackDistribution, name string) (*childLookup[T], error) {
	cur, found, err := k.current(ctx, l.Namespace, name)
	if err != nil {
		return nil, err
	}
	if found && isControlledBy(cur, l) && k.patch != nil && !hasManager(cur, FieldManager) {
		if cur, err = k.takeOver(ctx, l, cur); err != nil {
			return nil, err
		}
	}
	return &childLookup[T]{obj: cur, found: found}, nil
}

// ensure applies desired unless the live object already carries exactly what our
// manager would apply. It returns the resulting object; a *notOwnedError when an object
// of that name belongs to someone else.
func (k *childKind[T, AC]) ensure(ctx context.Context, l *v1alpha2.LlamaStackDistribution, desired metav1.Object) (T, error) {
	return k.ensureWith(ctx, l, ensureOptions[T]{name: desired.GetName(), build: fixed[T](desired)})
}

// ensureOptions are what differs between children in the one ensure path: how the
// object to apply is made from what exists (a claim that only grows; a ConfigMap copied
// from a source read live), and how an existing object is found up to date.
type ensureOptions[T metav1.Object] struct {
	name string
	// build returns the object to apply, given the existing one (found is false when
	// there is none); nil means nothing to write. It runs only for an object that is
	// absent or controlled by the CR, after any take-over.
	build func(ctx context.Context, cur T, found bool) (metav1.Object, error)
	// upToDate, when set, tells whether an existing object needs no write before build
	// runs, in place of comparing build's result with the fields our manager owns (for
	// the managed ConfigMaps, whose data the cache keeps only as a hash).
	upToDate func(cur T) bool
	// precondition makes an apply to an existing object carry its resourceVersion.
	precondition bool
	// looked, when set, is the lookup (current) the caller has already made, so the
	// object is not read a second time.
	looked *childLookup[T]
}

// childLookup is the result of childKind.current.
type childLookup[T metav1.Object] struct {
	obj   T
	found bool
}

// fixed is a build function that always returns desired.
func fixed[T metav1.Object](desired metav1.Object) func(context.Context, T, bool) (metav1.Object, error) {
	return func(context.Context, T, bool) (metav1.Object, error) { return desired, nil }
}

// ensureWith is the one path by which a child is written. It looks the object up
// (cache, then live), refuses one the CR does not control, takes over one made by the
// upstream operator, skips the write when nothing we own would change, and applies
// otherwise. It returns the existing object when nothing was written, and the existing
// object together with the error when the apply failed.
func (k *childKind[T, AC]) ensureWith(ctx context.Context, l *v1alpha2.LlamaStackDistribution, o ensureOptions[T]) (T, error) {
	var zero T
	namespace, name := l.Namespace, o.name
	var (
		cur   T
		found bool
		err   error
	)
	if o.looked != nil {
		cur, found = o.looked.obj, o.looked.found
	} else if cur, found, err = k.current(ctx, namespace, name); err != nil {
		return zero, err
	}
	if found && !isControlledBy(cur, l) {
		return cur, newNotOwnedError(k.kind, cur, l)
	}
	if found && k.patch != nil && !hasManager(cur, FieldManager) {
		if cur, err = k.takeOver(ctx, l, cur); err != nil {
			return zero, err
		}
	}
	if found && cur.GetDeletionTimestamp() != nil {
		// Being deleted: a write would change nothing that lasts. Its delete event
		// brings the CR back to make a new one.
		return cur, nil
	}
	if found && o.upToDate != nil && o.upToDate(cur) {
		return cur, nil
	}
	desired, err := o.build(ctx, cur, found)
	if err != nil || desired == nil {
		return cur, err
	}
	ac, err := toApplyConfiguration[AC](desired)
	if err != nil {
		return zero, fmt.Errorf("converting %s %s/%s to an apply configuration: %w", k.kind, namespace, name, err)
	}
	if found {
		if o.upToDate == nil {
			owned, err := k.extract(cur, FieldManager)
			if err != nil {
				return zero, fmt.Errorf("extracting our fields of %s %s/%s: %w", k.kind, namespace, name, err)
			}
			if equality.Semantic.DeepEqual(owned, ac) {
				return cur, nil
			}
			if logger := klog.FromContext(ctx); logger.V(5).Enabled() {
				logger.V(5).Info("Fields differ", "kind", k.kind, "object", klog.KRef(namespace, name), "diff", diff.Diff(owned, ac))
			}
		}
		if o.precondition {
			desired.SetResourceVersion(cur.GetResourceVersion())
			if ac, err = toApplyConfiguration[AC](desired); err != nil {
				return zero, err
			}
		}
	}
	obj, err := k.write(ctx, l, ac, namespace, name, found)
	if err != nil {
		return cur, err
	}
	return obj, nil
}

// takeOver runs once for a child that this CR controls but that our field manager has
// never written: one made by the upstream operator, which creates each object with a
// plain Create and then applies it with the CR's name as field manager. The fields
// those two managers own become ours (see takeOverPatch), so that the apply that follows
// removes what only upstream set, as if we had made the object. Fields of any other
// manager (users, other controllers) are left with them.
func (k *childKind[T, AC]) takeOver(ctx context.Context, l *v1alpha2.LlamaStackDistribution, cur T) (T, error) {
	namespace, name := cur.GetNamespace(), cur.GetName()
	// The cache keeps only our manager's entry; the others are read live.
	live, err := k.live(ctx, namespace, name)
	if err != nil {
		return cur, fmt.Errorf("getting %s %s/%s: %w", k.kind, namespace, name, err)
	}
	if !isControlledBy(live, l) {
		return live, newNotOwnedError(k.kind, live, l)
	}
	patch, from, err := takeOverPatch(live, l.Name)
	if err != nil || patch == nil {
		return live, err
	}
	obj, err := k.patch(ctx, namespace, name, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return cur, fmt.Errorf("taking over %s %s/%s: %w", k.kind, namespace, name, err)
	}
	klog.FromContext(ctx).V(2).Info("Took over child", "kind", k.kind, "object", klog.KRef(namespace, name), "fromManagers", from)
	k.recorder.Eventf(l, corev1.EventTypeNormal, "TookOver", "Took over %s %s from field managers %s", k.kind, name, strings.Join(from, ", "))
	return obj, nil
}

// takeOverPatch returns a JSON patch that gives our field manager the fields owned by
// the upstream operator's two managers in obj: its server-side apply manager, named
// after the CR, and the manager that created the object (the Update entry stamped with
// the creation time, other than Kubernetes' own components). The patch also sets the
// resourceVersion it was computed from, so a concurrent change makes it fail with a
// conflict. It returns nil when there is nothing to take over.
func takeOverPatch(obj metav1.Object, crName string) ([]byte, []string, error) {
	entries := make([]metav1.ManagedFieldsEntry, len(obj.GetManagedFields()))
	copy(entries, obj.GetManagedFields())
	var from []string
	creator := ""
	created := obj.GetCreationTimestamp()
	for i := range entries {
		e := &entries[i]
		switch {
		case e.Manager == FieldManager || e.Subresource != "":
		case e.Operation == metav1.ManagedFieldsOperationApply && e.Manager == crName:
			from = append(from, e.Manager)
			e.Manager = FieldManager
		case e.Operation == metav1.ManagedFieldsOperationUpdate && creator == "" && e.Time != nil && e.Time.Equal(&created) &&
			!strings.HasPrefix(e.Manager, "kube-") && !strings.HasPrefix(e.Manager, "system:"):
			creator = e.Manager
		}
	}
	if creator != "" {
		from = append(from, creator)
	}
	if len(from) == 0 {
		return nil, nil, nil
	}
	holder := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ManagedFields: entries}}
	if creator != "" {
		// Merges the creator's Update entry into our Apply entry (made from it if we
		// have none yet) and drops the Update entry.
		if err := csaupgrade.UpgradeManagedFields(holder, sets.New(creator), FieldManager); err != nil {
			return nil, nil, fmt.Errorf("merging the fields of manager %s: %w", creator, err)
		}
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/metadata/managedFields", "value": holder.ManagedFields},
		{"op": "replace", "path": "/metadata/resourceVersion", "value": obj.GetResourceVersion()},
	})
	return patch, from, err
}

// hasManager reports whether manager owns any field of obj.
func hasManager(obj metav1.Object, manager string) bool {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager {
			return true
		}
	}
	return false
}

// appliedFields returns the set of fields that manager owns in obj through
// server-side apply (the entry extract reads), and whether there is one. Reading one
// field's owner this way costs a small fraction of an extract, which converts and
// walks the whole object.
func appliedFields(obj metav1.Object, manager string) (*fieldpath.Set, bool) {
	for _, e := range obj.GetManagedFields() {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			return nil, false
		}
		return set, true
	}
	return nil, false
}

// write sends the apply configuration and records what happened.
func (k *childKind[T, AC]) write(ctx context.Context, l *v1alpha2.LlamaStackDistribution, ac *AC, namespace, name string, existed bool) (T, error) {
	logger := klog.FromContext(ctx)
	obj, err := k.apply(ctx, namespace, ac, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return obj, fmt.Errorf("applying %s %s/%s: %w", k.kind, namespace, name, err)
	}
	logger.V(2).Info(childWriteReason(!existed)+" child", "kind", k.kind, "object", klog.KRef(namespace, name))
	childWritten(ctx, k.recorder, l, !existed, k.kind, name)
	return obj, nil
}

// deleteIfOwned deletes the named child when it exists and this CR controls it.
// Objects of that name that belong to someone else are left alone.
func (k *childKind[T, AC]) deleteIfOwned(ctx context.Context, l *v1alpha2.LlamaStackDistribution, name string) error {
	cur, err := k.cached(l.Namespace, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !isControlledBy(cur, l) {
		return nil
	}
	uid := cur.GetUID()
	err = k.delete(ctx, l.Namespace, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Already gone, or replaced by another object since the cache saw it.
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting %s %s/%s: %w", k.kind, l.Namespace, name, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted child", "kind", k.kind, "object", klog.KRef(l.Namespace, name))
	k.recorder.Eventf(l, corev1.EventTypeNormal, "Deleted", "Deleted %s %s", k.kind, name)
	return nil
}

// toApplyConfiguration turns a typed object made by a newX builder into the apply
// configuration of its kind. Status and null fields are dropped: an apply carries only
// what the controller sets.
func toApplyConfiguration[AC any](obj any) (*AC, error) {
	if o, ok := obj.(runtime.Object); ok && o.GetObjectKind().GroupVersionKind().Empty() {
		return nil, fmt.Errorf("object %T has no apiVersion/kind", obj)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	pruneNulls(m)
	if raw, err = json.Marshal(m); err != nil {
		return nil, err
	}
	ac := new(AC)
	if err := json.Unmarshal(raw, ac); err != nil {
		return nil, err
	}
	return ac, nil
}

// pruneNulls removes null values (such as metadata.creationTimestamp) at every depth.
func pruneNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
				continue
			}
			pruneNulls(e)
		}
	case []any:
		for _, e := range t {
			pruneNulls(e)
		}
	}
}

package children

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

// Kind binds the typed client, lister and apply-configuration functions of one
// owned kind, so that one generic implementation ensures and deletes every child.
type Kind[T metav1.Object, AC any] struct {
	// Name is the kind's, as Events and errors say it (Deployment, Service).
	Name string
	// recorder records the Events of its writes (one per write when the sync keeps no
	// write log, see childWritten).
	recorder record.EventRecorder
	// Cached reads the informer cache.
	Cached func(namespace, name string) (T, error)
	// Live reads the API server; used only when the cache misses.
	Live func(ctx context.Context, namespace, name string) (T, error)
	// Extract returns the fields the named manager owns in obj.
	Extract func(obj T, fieldManager string) (*AC, error)
	apply   func(ctx context.Context, namespace string, ac *AC, opts metav1.ApplyOptions) (T, error)
	// Delete deletes an object; nil for kinds never deleted.
	Delete func(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
	// Patch sends a JSON patch (used once per object, to take it over from the operator
	// that made it); nil for kinds never taken over.
	Patch func(ctx context.Context, namespace, name string, data []byte, opts metav1.PatchOptions) (T, error)
}

// Current returns the existing object of that name, from the cache or, on a miss, live.
// found is false when it does not exist.
func (k *Kind[T, AC]) Current(ctx context.Context, namespace, name string) (obj T, found bool, err error) {
	obj, err = k.Cached(namespace, name)
	if err == nil {
		return obj, true, nil
	}
	if !apierrors.IsNotFound(err) {
		return obj, false, err
	}
	obj, err = k.Live(ctx, namespace, name)
	if apierrors.IsNotFound(err) {
		return obj, false, nil
	}
	if err != nil {
		return obj, false, fmt.Errorf("getting %s %s/%s: %w", k.Name, namespace, name, err)
	}
	return obj, true, nil
}

// LookUp is the lookup ensureWith starts with, and the take-over of an object of the
// CR's made by the upstream operator, for a caller that decides what to apply from
// what it finds before it writes (EnsureOptions.Looked).
func (k *Kind[T, AC]) LookUp(ctx context.Context, l *v1alpha2.LlamaStackDistribution, name string) (*Lookup[T], error) {
	cur, found, err := k.Current(ctx, l.Namespace, name)
	if err != nil {
		return nil, err
	}
	if found && llsd.IsControlledBy(cur, l) && k.Patch != nil && !HasManager(cur, llsd.FieldManager) {
		if cur, err = k.takeOver(ctx, l, cur); err != nil {
			return nil, err
		}
	}
	return &Lookup[T]{Obj: cur, Found: found}, nil
}

// Ensure applies desired unless the live object already carries exactly what our
// manager would apply. It returns the resulting object; a *NotOwnedError when an object
// of that name belongs to someone else.
func (k *Kind[T, AC]) Ensure(ctx context.Context, l *v1alpha2.LlamaStackDistribution, desired metav1.Object) (T, error) {
	return k.EnsureWith(ctx, l, EnsureOptions[T]{Name: desired.GetName(), Build: Fixed[T](desired)})
}

// EnsureOptions are what differs between children in the one ensure path: how the
// object to apply is made from what exists (a claim that only grows; a ConfigMap copied
// from a source read live), and how an existing object is found up to date.
type EnsureOptions[T metav1.Object] struct {
	// Name is the object's.
	Name string
	// Build returns the object to apply, given the existing one (found is false when
	// there is none); nil means nothing to write. It runs only for an object that is
	// absent or controlled by the CR, after any take-over.
	Build func(ctx context.Context, cur T, found bool) (metav1.Object, error)
	// UpToDate, when set, tells whether an existing object needs no write before build
	// runs, in place of comparing build's result with the fields our manager owns (for
	// the managed ConfigMaps, whose data the cache keeps only as a hash).
	UpToDate func(cur T) bool
	// Precondition makes an apply to an existing object carry its resourceVersion.
	Precondition bool
	// Looked, when set, is the lookup (current) the caller has already made, so the
	// object is not read a second time.
	Looked *Lookup[T]
}

// Lookup is the result of Kind.Current.
type Lookup[T metav1.Object] struct {
	Obj   T
	Found bool
}

// Fixed is a build function that always returns desired.
func Fixed[T metav1.Object](desired metav1.Object) func(context.Context, T, bool) (metav1.Object, error) {
	return func(context.Context, T, bool) (metav1.Object, error) { return desired, nil }
}

// EnsureWith is the one path by which a child is written. It looks the object up
// (cache, then live), refuses one the CR does not control, takes over one made by the
// upstream operator, skips the write when nothing we own would change, and applies
// otherwise. It returns the existing object when nothing was written, and the existing
// object together with the error when the apply failed.
func (k *Kind[T, AC]) EnsureWith(ctx context.Context, l *v1alpha2.LlamaStackDistribution, o EnsureOptions[T]) (T, error) {
	var zero T
	namespace, name := l.Namespace, o.Name
	var (
		cur   T
		found bool
		err   error
	)
	if o.Looked != nil {
		cur, found = o.Looked.Obj, o.Looked.Found
	} else if cur, found, err = k.Current(ctx, namespace, name); err != nil {
		return zero, err
	}
	if found && !llsd.IsControlledBy(cur, l) {
		return cur, NewNotOwnedError(k.Name, cur, l)
	}
	if found && k.Patch != nil && !HasManager(cur, llsd.FieldManager) {
		if cur, err = k.takeOver(ctx, l, cur); err != nil {
			return zero, err
		}
	}
	if found && cur.GetDeletionTimestamp() != nil {
		// Being deleted: a write would change nothing that lasts. Its delete event
		// brings the CR back to make a new one.
		return cur, nil
	}
	if found && o.UpToDate != nil && o.UpToDate(cur) {
		return cur, nil
	}
	desired, err := o.Build(ctx, cur, found)
	if err != nil || desired == nil {
		return cur, err
	}
	ac, err := ToApplyConfiguration[AC](desired)
	if err != nil {
		return zero, fmt.Errorf("converting %s %s/%s to an apply configuration: %w", k.Name, namespace, name, err)
	}
	if found {
		if o.UpToDate == nil {
			owned, err := k.Extract(cur, llsd.FieldManager)
			if err != nil {
				return zero, fmt.Errorf("extracting our fields of %s %s/%s: %w", k.Name, namespace, name, err)
			}
			if equality.Semantic.DeepEqual(owned, ac) {
				return cur, nil
			}
			if logger := klog.FromContext(ctx); logger.V(5).Enabled() {
				logger.V(5).Info("Fields differ", "kind", k.Name, "object", klog.KRef(namespace, name), "diff", diff.Diff(owned, ac))
			}
		}
		if o.Precondition {
			desired.SetResourceVersion(cur.GetResourceVersion())
			if ac, err = ToApplyConfiguration[AC](desired); err != nil {
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
func (k *Kind[T, AC]) takeOver(ctx context.Context, l *v1alpha2.LlamaStackDistribution, cur T) (T, error) {
	namespace, name := cur.GetNamespace(), cur.GetName()
	// The cache keeps only our manager's entry; the others are read live.
	live, err := k.Live(ctx, namespace, name)
	if err != nil {
		return cur, fmt.Errorf("getting %s %s/%s: %w", k.Name, namespace, name, err)
	}
	if !llsd.IsControlledBy(live, l) {
		return live, NewNotOwnedError(k.Name, live, l)
	}
	patch, from, err := takeOverPatch(live, l.Name)
	if err != nil || patch == nil {
		return live, err
	}
	obj, err := k.Patch(ctx, namespace, name, patch, metav1.PatchOptions{FieldManager: llsd.FieldManager})
	if err != nil {
		return cur, fmt.Errorf("taking over %s %s/%s: %w", k.Name, namespace, name, err)
	}
	klog.FromContext(ctx).V(2).Info("Took over child", "kind", k.Name, "object", klog.KRef(namespace, name), "fromManagers", from)
	k.recorder.Eventf(l, corev1.EventTypeNormal, "TookOver", "Took over %s %s from field managers %s", k.Name, name, strings.Join(from, ", "))
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
		case e.Manager == llsd.FieldManager || e.Subresource != "":
		case e.Operation == metav1.ManagedFieldsOperationApply && e.Manager == crName:
			from = append(from, e.Manager)
			e.Manager = llsd.FieldManager
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
		if err := csaupgrade.UpgradeManagedFields(holder, sets.New(creator), llsd.FieldManager); err != nil {
			return nil, nil, fmt.Errorf("merging the fields of manager %s: %w", creator, err)
		}
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/metadata/managedFields", "value": holder.ManagedFields},
		{"op": "replace", "path": "/metadata/resourceVersion", "value": obj.GetResourceVersion()},
	})
	return patch, from, err
}

// HasManager reports whether manager owns any field of obj.
func HasManager(obj metav1.Object, manager string) bool {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager {
			return true
		}
	}
	return false
}

// AppliedFields returns the set of fields that manager owns in obj through
// server-side apply (the entry extract reads), and whether there is one. Reading one
// field's owner this way costs a small fraction of an extract, which converts and
// walks the whole object.
func AppliedFields(obj metav1.Object, manager string) (*fieldpath.Set, bool) {
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
func (k *Kind[T, AC]) write(ctx context.Context, l *v1alpha2.LlamaStackDistribution, ac *AC, namespace, name string, existed bool) (T, error) {
	logger := klog.FromContext(ctx)
	obj, err := k.apply(ctx, namespace, ac, metav1.ApplyOptions{FieldManager: llsd.FieldManager, Force: true})
	if err != nil {
		return obj, fmt.Errorf("applying %s %s/%s: %w", k.Name, namespace, name, err)
	}
	logger.V(2).Info(WriteReason(!existed)+" child", "kind", k.Name, "object", klog.KRef(namespace, name))
	childWritten(ctx, k.recorder, l, !existed, k.Name, name)
	return obj, nil
}

// DeleteIfOwned deletes the named child when it exists and this CR controls it.
// Objects of that name that belong to someone else are left alone.
func (k *Kind[T, AC]) DeleteIfOwned(ctx context.Context, l *v1alpha2.LlamaStackDistribution, name string) error {
	return k.DeleteIfOwnedBecause(ctx, l, name, "")
}

// DeleteIfOwnedBecause is DeleteIfOwned for a child deleted because of something the
// CR does not say (a feature flag of the operator ConfigMap): because, when not empty,
// ends the message of the Deleted Event on the CR and is in the log line.
func (k *Kind[T, AC]) DeleteIfOwnedBecause(ctx context.Context, l *v1alpha2.LlamaStackDistribution, name, because string) error {
	cur, err := k.Cached(l.Namespace, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !llsd.IsControlledBy(cur, l) {
		return nil
	}
	if k.Delete == nil {
		return fmt.Errorf("%s %s/%s is not the CR's to delete: the controller never deletes a %s", k.Name, l.Namespace, name, k.Name)
	}
	uid := cur.GetUID()
	err = k.Delete(ctx, l.Namespace, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Already gone, or replaced by another object since the cache saw it.
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting %s %s/%s: %w", k.Name, l.Namespace, name, err)
	}
	msg := fmt.Sprintf("Deleted %s %s", k.Name, name)
	if because != "" {
		msg += ": " + because
	}
	klog.FromContext(ctx).V(2).Info("Deleted child", "kind", k.Name, "object", klog.KRef(l.Namespace, name), "because", because)
	k.recorder.Event(l, corev1.EventTypeNormal, "Deleted", msg)
	return nil
}

// ToApplyConfiguration turns a typed object made by a newX builder into the apply
// configuration of its kind. Status and null fields are dropped: an apply carries only
// what the controller sets.
func ToApplyConfiguration[AC any](obj any) (*AC, error) {
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

package children

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// Binder collects the kinds bound by Bind.
type Binder struct {
	Factory  kubeinformers.SharedInformerFactory
	Recorder record.EventRecorder
	// Kinds are the kinds bound, Err what failed.
	Kinds []Bound
	Err   error
}

// Bound is one kind of the table: its resource, kind and informer.
type Bound struct {
	Resource schema.GroupVersionResource
	Kind     string
	Informer cache.SharedIndexInformer
	// Deletes tells whether the controller deletes objects of the kind (the claim,
	// which holds the user's data, it never does).
	Deletes bool
}

// Bind binds one kind to the factory's informer for its resource.
func Bind[T metav1.Object, AC any, C TypedClient[T, AC]](
	b *Binder, gvr schema.GroupVersionResource, kind string, client func(namespace string) C,
	extract func(obj T, fieldManager string) (*AC, error), flags Flags,
) *Kind[T, AC] {
	generic, err := b.Factory.ForResource(gvr)
	if err != nil {
		b.Err = errors.Join(b.Err, fmt.Errorf("watching %s: %w", kind, err))
		return nil
	}
	informer := generic.Informer()
	b.Kinds = append(b.Kinds, Bound{Resource: gvr, Kind: kind, Informer: informer, Deletes: flags&NeverDelete == 0})
	return NewKind(b.Recorder, kind, FromIndexer[T](informer.GetIndexer(), gvr.GroupResource()), client, extract, flags)
}

// FromIndexer reads one kind's objects from its informer's cache, as its lister does.
func FromIndexer[T any](indexer cache.Indexer, resource schema.GroupResource) func(namespace, name string) (T, error) {
	return func(ns, n string) (T, error) {
		var zero T
		obj, exists, err := indexer.GetByKey(ns + "/" + n)
		if err != nil {
			return zero, err
		}
		if !exists {
			return zero, apierrors.NewNotFound(resource, n)
		}
		t, ok := obj.(T)
		if !ok {
			return zero, fmt.Errorf("the %s cache holds a %T", resource, obj)
		}
		return t, nil
	}
}

// Flags leave out what the controller never does to a kind.
type Flags uint8

const (
	// NeverDelete leaves Kind.delete nil.
	NeverDelete Flags = 1 << iota
	// NeverTakeOver leaves Kind.patch nil: objects are never taken over from
	// another manager.
	NeverTakeOver
)

// TypedClient is the part of a client-go typed client for one kind, in one namespace,
// that Kind calls. Every generated client has these methods with these shapes.
type TypedClient[T any, AC any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Apply(ctx context.Context, ac *AC, opts metav1.ApplyOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// NewKind binds one kind: cached reads the informer cache, client gives the typed
// client of a namespace (such as kubeClient.AppsV1().Deployments), and extract is the
// kind's Extract<Kind> function.
func NewKind[T metav1.Object, AC any, C TypedClient[T, AC]](
	recorder record.EventRecorder, kind string, cached func(namespace, name string) (T, error), client func(namespace string) C,
	extract func(obj T, fieldManager string) (*AC, error), flags Flags,
) *Kind[T, AC] {
	k := &Kind[T, AC]{
		recorder: recorder,
		Name:     kind,
		Cached:   cached,
		Live: func(ctx context.Context, ns, n string) (T, error) {
			return client(ns).Get(ctx, n, metav1.GetOptions{})
		},
		Extract: extract,
		apply: func(ctx context.Context, ns string, ac *AC, o metav1.ApplyOptions) (T, error) {
			return client(ns).Apply(ctx, ac, o)
		},
	}
	if flags&NeverTakeOver == 0 {
		k.Patch = func(ctx context.Context, ns, n string, data []byte, o metav1.PatchOptions) (T, error) {
			return client(ns).Patch(ctx, n, types.JSONPatchType, data, o)
		}
	}
	if flags&NeverDelete == 0 {
		k.Delete = func(ctx context.Context, ns, n string, o metav1.DeleteOptions) error {
			return client(ns).Delete(ctx, n, o)
		}
	}
	return k
}

package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	coreac "k8s.io/client-go/applyconfigurations/core/v1"
	core "k8s.io/client-go/testing"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/controller/children"
)

// Tests of apply.go: first its functions, on the Service kind over the fixture's fakes;
// then the write strategy through whole syncs (objects of others, fields removed or
// owned by others). children_test.go covers the rest of the children's life.

var servicesResource = corev1.SchemeGroupVersion.WithResource("services")

// ownedService is the Service the controller would make for l, stored in the fake API
// (as its Create would) and in the caches.
func ownedService(f *fixture, l *v1alpha1.LlamaStackDistribution) *corev1.Service {
	f.t.Helper()
	svc, err := f.kubeclient.CoreV1().Services(l.Namespace).Create(f.ctx, children.NewService(hub(l), children.AskedListening(hub(l), "")), metav1.CreateOptions{})
	require.NoError(f.t, err)
	f.refreshCaches()
	return svc
}

func TestCurrent(t *testing.T) {
	tests := map[string]struct {
		setup     func(f *fixture, l *v1alpha1.LlamaStackDistribution)
		wantFound bool
		wantGet   bool // a live GET was sent
		wantErr   string
	}{
		"in the cache": {
			setup:     func(f *fixture, l *v1alpha1.LlamaStackDistribution) { ownedService(f, l) },
			wantFound: true,
		},
		"unlabelled, so only live": {
			setup: func(f *fixture, l *v1alpha1.LlamaStackDistribution) {
				require.NoError(t, f.kubeclient.Tracker().Add(foreignObject(kindService, "app-service", false)))
				f.refreshCaches()
			},
			wantFound: true, wantGet: true,
		},
		"nowhere": {
			setup:   func(*fixture, *v1alpha1.LlamaStackDistribution) {},
			wantGet: true,
		},
		"live read fails": {
			setup: func(f *fixture, _ *v1alpha1.LlamaStackDistribution) {
				f.failing("get", apierrors.NewServiceUnavailable("etcd is away"))
			},
			wantGet: true,
			wantErr: "getting Service demo/app-service: etcd is away",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := newLLSDv1("app")
			f := newFixture(t, l)
			tc.setup(f, l)
			f.kubeclient.ClearActions()

			obj, found, err := f.c.services.Current(f.ctx, testNamespace, "app-service")

			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.wantFound, found)
			if found {
				assert.Equal(t, "app-service", obj.Name)
			}
			assert.Equal(t, tc.wantGet, len(f.kubeclient.Actions()) > 0, "actions: %v", describe(f.kubeclient.Actions()))
		})
	}
}

func TestEnsureObject(t *testing.T) {
	portChanged := func(l *v1alpha2.LlamaStackDistribution) *corev1.Service {
		svc := children.NewService(l, children.AskedListening(l, ""))
		svc.Spec.Ports[0].Port = 9000
		return svc
	}
	tests := map[string]struct {
		setup        func(f *fixture, l *v1alpha1.LlamaStackDistribution)
		desired      func(l *v1alpha2.LlamaStackDistribution) *corev1.Service
		precondition bool
		wantWrites   []string
		wantEvents   []string
		wantNotOwned bool
		// wantResourceVersion is what the apply configuration must carry ("" for none).
		wantResourceVersion bool
	}{
		"absent: created": {
			setup:      func(*fixture, *v1alpha1.LlamaStackDistribution) {},
			desired:    plainService,
			wantWrites: []string{"patch services app-service"},
			wantEvents: []string{"Normal Created Created Service app-service"},
		},
		"ours and unchanged: nothing sent": {
			setup: func(f *fixture, l *v1alpha1.LlamaStackDistribution) {
				_, err := f.c.services.Ensure(f.ctx, hub(l), children.NewService(hub(l), children.AskedListening(hub(l), "")))
				require.NoError(t, err)
				f.refreshCaches()
				f.events()
			},
			desired: plainService,
		},
		"ours and changed: applied": {
			setup: func(f *fixture, l *v1alpha1.LlamaStackDistribution) {
				_, err := f.c.services.Ensure(f.ctx, hub(l), children.NewService(hub(l), children.AskedListening(hub(l), "")))
				require.NoError(t, err)
				f.refreshCaches()
				f.events()
			},
			desired:    portChanged,
			wantWrites: []string{"patch services app-service"},
			wantEvents: []string{"Normal Updated Updated Service app-service"},
		},
		"ours and changed, with precondition: the cached resourceVersion is sent": {
			setup: func(f *fixture, l *v1alpha1.LlamaStackDistribution) {
				_, err := f.c.services.Ensure(f.ctx, hub(l), children.NewService(hub(l), children.AskedListening(hub(l), "")))
				require.NoError(t, err)
				// The fake API assigns no resourceVersions: give the object one.
				obj, err := f.kubeclient.Tracker().Get(servicesResource, testNamespace, "app-service")
				require.NoError(t, err)
				obj.(*corev1.Service).ResourceVersion = "17"
				require.NoError(t, f.kubeclient.Tracker().Update(servicesResource, obj, testNamespace))
				f.refreshCaches()
				f.events()
			},
			desired:             portChanged,
			precondition:        true,
			wantWrites:          []string{"patch services app-service"},
			wantEvents:          []string{"Normal Updated Updated Service app-service"},
			wantResourceVersion: true,
		},
		"absent, with precondition: no resourceVersion": {
			setup:        func(*fixture, *v1alpha1.LlamaStackDistribution) {},
			desired:      plainService,
			precondition: true,
			wantWrites:   []string{"patch services app-service"},
			wantEvents:   []string{"Normal Created Created Service app-service"},
		},
		"someone else's: reported, not written": {
			setup: func(f *fixture, l *v1alpha1.LlamaStackDistribution) {
				require.NoError(t, f.kubeclient.Tracker().Add(foreignObject(kindService, "app-service", true)))
				f.refreshCaches()
			},
			desired:      plainService,
			wantNotOwned: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := newLLSDv1("app")
			f := newFixture(t, l)
			tc.setup(f, l)
			cachedRV := ""
			if cached, err := f.c.services.Cached(testNamespace, "app-service"); err == nil {
				cachedRV = cached.ResourceVersion
			}
			f.kubeclient.ClearActions()

			desired := tc.desired(hub(l))
			got, err := f.c.services.EnsureWith(f.ctx, hub(l), children.EnsureOptions[*corev1.Service]{Name: desired.GetName(), Build: children.Fixed[*corev1.Service](desired), Precondition: tc.precondition})

			actions := f.kubeclient.Actions()
			assert.Equal(t, tc.wantWrites, writesTo(actions, "services", "app-service"))
			assert.Equal(t, tc.wantEvents, f.events())
			if tc.wantNotOwned {
				var notOwned *children.NotOwnedError
				require.ErrorAs(t, err, &notOwned)
				assert.True(t, notOwned.Orphaned, "controlled by an earlier CR of the same name")
				assert.Equal(t, "Service demo/app-service belongs to an earlier LlamaStackDistribution of this name, deleted since; the controller creates its own as soon as the garbage collector has deleted it", err.Error())
				require.NotNil(t, got, "the object in the way is returned")
				assert.Equal(t, types.UID("uid-of-an-earlier-app"), metav1.GetControllerOf(got).UID)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "app-service", got.Name)
			for _, a := range mutating(actions) {
				p := a.(core.PatchAction)
				assert.Equal(t, types.ApplyPatchType, p.GetPatchType())
				var sent struct {
					Metadata struct {
						ResourceVersion string `json:"resourceVersion"`
					} `json:"metadata"`
				}
				require.NoError(t, json.Unmarshal(p.GetPatch(), &sent))
				if tc.wantResourceVersion {
					require.NotEmpty(t, cachedRV)
					assert.Equal(t, cachedRV, sent.Metadata.ResourceVersion)
				} else {
					assert.Empty(t, sent.Metadata.ResourceVersion)
				}
			}
		})
	}
}

// A child this CR controls that our field manager never wrote (the upstream operator's)
// is taken over with a JSON patch of its managed fields before the apply.
func TestEnsureTakesOverAnUpstreamChild(t *testing.T) {
	l := newLLSDv1("app")
	f := newFixture(t, l)
	svcs := f.kubeclient.CoreV1().Services(testNamespace)
	_, err := svcs.Create(f.ctx, children.NewService(hub(l), children.AskedListening(hub(l), "")), metav1.CreateOptions{FieldManager: "manager"})
	require.NoError(t, err)
	ac := coreac.Service("app-service", testNamespace).WithLabels(map[string]string{"upstream": "yes"})
	_, err = svcs.Apply(f.ctx, ac, metav1.ApplyOptions{FieldManager: "app", Force: true})
	require.NoError(t, err)
	f.refreshCaches()
	f.kubeclient.ClearActions()

	_, err = f.c.services.Ensure(f.ctx, hub(l), children.NewService(hub(l), children.AskedListening(hub(l), "")))
	require.NoError(t, err)

	var patchTypes []types.PatchType
	for _, a := range mutating(f.kubeclient.Actions()) {
		patchTypes = append(patchTypes, a.(core.PatchAction).GetPatchType())
	}
	assert.Equal(t, []types.PatchType{types.JSONPatchType, types.ApplyPatchType}, patchTypes, "take over, then apply")
	events := f.events()
	assert.True(t, hasEvent(events, "Normal TookOver Took over Service app-service from field managers app"), "events: %v", events)
	svc, err := svcs.Get(f.ctx, "app-service", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, children.HasManager(svc, FieldManager))
	assert.False(t, children.HasManager(svc, "app"), "upstream's apply manager is gone: %+v", svc.ManagedFields)
	assert.NotContains(t, svc.Labels, "upstream", "what only upstream set is removed by our apply")
}

func TestDeleteIfOwned(t *testing.T) {
	tests := map[string]struct {
		setup      func(f *fixture, l *v1alpha1.LlamaStackDistribution)
		wantDelete bool
		wantErr    string
		wantEvents []string
		wantStored bool
	}{
		"absent from the cache: nothing sent": {
			setup: func(*fixture, *v1alpha1.LlamaStackDistribution) {},
		},
		"someone else's: left alone": {
			setup: func(f *fixture, _ *v1alpha1.LlamaStackDistribution) {
				require.NoError(t, f.kubeclient.Tracker().Add(foreignObject(kindService, "app-service", true)))
				f.refreshCaches()
			},
			wantStored: true,
		},
		"ours: deleted with its UID as precondition": {
			setup:      func(f *fixture, l *v1alpha1.LlamaStackDistribution) { ownedService(f, l) },
			wantDelete: true,
			wantEvents: []string{"Normal Deleted Deleted Service app-service"},
		},
		"replaced since the cache saw it (UID precondition conflict): no error, no Event": {
			setup: func(f *fixture, l *v1alpha1.LlamaStackDistribution) {
				ownedService(f, l)
				f.failing("delete", apierrors.NewConflict(schema.GroupResource{Resource: "services"}, "app-service",
					errors.New("Precondition failed: UID in precondition: uid-old, UID in object meta: uid-new")))
			},
			wantDelete: true,
			wantStored: true,
		},
		"already gone: no error, no Event": {
			setup: func(f *fixture, l *v1alpha1.LlamaStackDistribution) {
				ownedService(f, l)
				f.failing("delete", apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, "app-service"))
			},
			wantDelete: true,
			wantStored: true,
		},
		"refused: the error is returned": {
			setup: func(f *fixture, l *v1alpha1.LlamaStackDistribution) {
				ownedService(f, l)
				f.failing("delete", apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "app-service", errors.New("no")))
			},
			wantDelete: true,
			wantStored: true,
			wantErr:    `deleting Service demo/app-service: services "app-service" is forbidden: no`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := newLLSDv1("app")
			f := newFixture(t, l)
			tc.setup(f, l)
			var cachedUID types.UID
			if cached, err := f.c.services.Cached(testNamespace, "app-service"); err == nil {
				cachedUID = cached.UID
			}
			f.kubeclient.ClearActions()

			// The controller never deletes its Services (they go with the CR): the engine
			// is tried on the same kind bound with deletion.
			services := children.NewKind(f.c.recorder, "Service", f.c.services.Cached, f.kubeclient.CoreV1().Services,
				coreac.ExtractService, 0)
			err := services.DeleteIfOwned(f.ctx, hub(l), "app-service")

			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			var deletes []core.DeleteAction
			for _, a := range f.kubeclient.Actions() {
				if d, ok := a.(core.DeleteAction); ok {
					deletes = append(deletes, d)
				}
			}
			if tc.wantDelete {
				require.Len(t, deletes, 1)
				opts := deletes[0].GetDeleteOptions()
				require.NotNil(t, opts.Preconditions)
				assert.Equal(t, &cachedUID, opts.Preconditions.UID)
			} else {
				assert.Empty(t, deletes)
			}
			assert.Equal(t, tc.wantEvents, f.events())
			_, err = f.kubeclient.Tracker().Get(servicesResource, testNamespace, "app-service")
			assert.Equal(t, tc.wantStored, err == nil, "stored: %v", err)
		})
	}
}

// Sync-level tests of the write strategy: whole CRs through sync.

var foreignVariants = map[string]bool{
	"unlabelled without owner (seen only by a live GET)": false,
	"labelled and controlled by another CR":              true,
}

func TestForeignObjectIsReportedAndNeverWritten(t *testing.T) {
	for _, k := range allOwnedKinds {
		for variant, labelled := range foreignVariants {
			t.Run(k.kind+"/"+variant, func(t *testing.T) {
				l := newLLSDv1("app", allChildren)
				name := k.name(hub(l))
				foreign := foreignObject(k, name, labelled)
				f := newFixture(t, append(allChildrenObjects(), l, foreign)...)
				before := f.stored(k, name)
				require.NotNil(t, before)
				before = before.(runtime.Object).DeepCopyObject().(metav1.Object)

				actions := f.sync("app")
				assert.Empty(t, writesTo(actions, k.resource, name), "no write to someone else's %s", k.kind)
				after := f.stored(k, name)
				require.NotNil(t, after, "someone else's %s was deleted", k.kind)
				assert.Equal(t, before, after, "someone else's %s was changed", k.kind)

				got := f.llsd("app")
				requireUserError(t, got, v1alpha2.ReasonResourceNotOwned, fmt.Sprintf("%s %s/%s", k.kind, testNamespace, name))
				events := f.events()
				assert.Equal(t, 1, countEvents(events, "Warning ResourceNotOwned"), "events: %v", events)
				assert.True(t, hasEvent(events, name), "events: %v", events)

				// The same state again: nothing written, no second Event.
				actions = f.sync("app")
				assert.Empty(t, writesTo(actions, k.resource, name))
				assert.Empty(t, writesTo(actions, "llamastackdistributions", "app"), "status unchanged")
				assert.Zero(t, countEvents(f.events(), "Warning"))
				assert.Equal(t, v1alpha2.PhaseFailed, f.llsd("app").Status.Phase)
			})
		}
	}
}

func TestForeignObjectIsNotDeletedWhenFeatureIsOff(t *testing.T) {
	for _, k := range []ownedKind{kindHPA, kindPDB, kindIngress, kindNetworkPolicy, kindConfigMapCopy} {
		for variant, labelled := range foreignVariants {
			t.Run(k.kind+"/"+variant, func(t *testing.T) {
				l := newLLSDv1("app") // no autoscaling, PDB, Ingress or user config
				name := k.name(hub(l))
				f := newFixture(t, l, foreignObject(k, name, labelled),
					operatorConfigMap(map[string]string{"featureFlags": featureFlagsOff}))

				actions := f.sync("app")
				assert.Empty(t, writesTo(actions, k.resource, name))
				assert.NotNil(t, f.stored(k, name), "someone else's %s was deleted", k.kind)
				f.converge("app")
				assert.NotNil(t, f.stored(k, name))
			})
		}
	}
}

func TestRemovedFieldsVanishFromTheDeployment(t *testing.T) {
	f := newFixture(t, newLLSDv1("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "KEEP", Value: "1"}, {Name: "DROP", Value: "2"}}
		l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{
			Volumes:      []corev1.Volume{{Name: "extra", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			VolumeMounts: []corev1.VolumeMount{{Name: "extra", MountPath: "/extra"}},
		}
	}))
	f.converge("app")
	d := f.deployment("app")
	require.Contains(t, envNames(serverOf(t, d).Env), "DROP")
	require.Contains(t, volumeNames(d.Spec.Template.Spec.Volumes), "extra")
	require.Contains(t, mountNames(serverOf(t, d).VolumeMounts), "extra")

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Env = l.Spec.Server.ContainerSpec.Env[:1]
		l.Spec.Server.PodOverrides = nil
	})
	actions := f.sync("app")
	assert.Equal(t, []string{"patch deployments app"}, writesTo(actions, "deployments", "app"))
	d = f.deployment("app")
	assert.NotContains(t, envNames(serverOf(t, d).Env), "DROP")
	assert.Contains(t, envNames(serverOf(t, d).Env), "KEEP")
	assert.NotContains(t, volumeNames(d.Spec.Template.Spec.Volumes), "extra")
	assert.NotContains(t, mountNames(serverOf(t, d).VolumeMounts), "extra")
	f.converge("app")
	require.Empty(t, describe(f.sync("app")))
}

func TestFieldsOwnedByOthersSurvive(t *testing.T) {
	f := newFixture(t, newLLSDv1("app"))
	f.converge("app")
	selector := f.deployment("app").Spec.Selector.DeepCopy()
	assert.Equal(t, map[string]string{"app": "llama-stack", "app.kubernetes.io/instance": "app"}, selector.MatchLabels)

	f.updateDeployment("app", "someone-else", func(d *appsv1.Deployment) {
		d.Labels["team"] = "blue"
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations["example.com/note"] = "kept"
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers,
			corev1.Container{Name: "sidecar", Image: "busybox:1.36"})
	})
	require.Empty(t, describe(f.sync("app")), "others' fields are no reason to apply")

	f.updateLLSD("app", func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{{Name: "NEW", Value: "1"}}
	})
	actions := f.sync("app")
	assert.Equal(t, []string{"patch deployments app"}, writesTo(actions, "deployments", "app"))
	d := f.deployment("app")
	assert.Equal(t, "blue", d.Labels["team"])
	assert.Equal(t, "kept", d.Annotations["example.com/note"])
	assert.Equal(t, []string{"llama-stack", "sidecar"}, containerNames(d.Spec.Template.Spec.Containers))
	assert.Equal(t, "1", envValue(t, serverContainerOf(t, d).Env, "NEW"))
	assert.Equal(t, selector, d.Spec.Selector, "the selector never changes")
	f.converge("app")
	require.Empty(t, describe(f.sync("app")))
	assert.Equal(t, selector, f.deployment("app").Spec.Selector)
}

// plainService is the Service of a server without a metrics port.
func plainService(l *v1alpha2.LlamaStackDistribution) *corev1.Service {
	return children.NewService(l, children.AskedListening(l, ""))
}

// Package rollout follows the rollouts of the server Deployments: how far one has come
// (Progress), why a pod of it does not start (pod problems), and the automatic rollback
// of one that failed to the template of the ReplicaSet that last served.
package rollout

import (
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	appsac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// Rollouts reads the rollouts of the CRs' Deployments from the caches, and decides
// their rollbacks.
type Rollouts struct {
	// Client reads what a rollback is about to restore live: the served ReplicaSet's
	// template, the Secrets it needs.
	Client kubernetes.Interface
	// ReplicaSets and Pods are the caches of the server ReplicaSets and pods; Pods nil
	// when pods are not watched.
	ReplicaSets appslisters.ReplicaSetLister
	Pods        corelisters.PodLister
	// ConfigMap reads a ConfigMap from the cache.
	ConfigMap func(namespace, name string) (*corev1.ConfigMap, error)
	// Extract returns the fields the named manager owns in a Deployment.
	Extract func(d *appsv1.Deployment, fieldManager string) (*appsac.DeploymentApplyConfiguration, error)
	// Now tells the time of a rollback.
	Now func() time.Time

	// written holds, per CR, the rollback last written until the cache has it
	// (rollbackWrite).
	written sync.Map
}

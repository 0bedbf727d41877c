package localcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

var getOptions = metav1.GetOptions{}

// Zones the fake nodes are spread over, round robin.
var fakeNodeZones = []string{"local-a", "local-b", "local-c"}

// fakeNode returns the Node object of the i-th fake node. kwok fills in the
// conditions, addresses and node info; capacity and allocatable are kept.
func fakeNode(name string, i int) *corev1.Node {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				FakeNodeAnnotation:             FakeNodeValue,
				"node.alpha.kubernetes.io/ttl": "0",
			},
			Labels: map[string]string{
				FakeNodeLabel:                   FakeNodeLabelValue,
				"kubernetes.io/hostname":        name,
				"kubernetes.io/os":              "linux",
				"kubernetes.io/arch":            "amd64",
				"topology.kubernetes.io/region": "local",
				"topology.kubernetes.io/zone":   fakeNodeZones[i%len(fakeNodeZones)],
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources.DeepCopy(),
		},
	}
}

// createNode creates node; an existing one is fine (a retried create).
func createNode(ctx context.Context, client kubernetes.Interface, node *corev1.Node) error {
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// nodesReady returns nil when every named node has condition Ready=True.
func nodesReady(ctx context.Context, client kubernetes.Interface, names []string) error {
	for _, name := range names {
		node, err := client.CoreV1().Nodes().Get(ctx, name, getOptions)
		if err != nil {
			return err
		}
		ready := false
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			return fmt.Errorf("node %s is not Ready", name)
		}
	}
	return nil
}

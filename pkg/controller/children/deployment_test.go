package children

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/llsd"
	"github.com/llamastack/llama-stack-controller/pkg/controller/revision"
)

// testImage is starter's pinned image.
const testImage = "docker.io/ogxai/distribution-starter:1.3.0"

// testLLSD returns a minimal CR as the API server would store it, changed by mutate.
func testLLSD(mutate func(*v1alpha1.LlamaStackDistribution)) *v1alpha1.LlamaStackDistribution {
	l := &v1alpha1.LlamaStackDistribution{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "team-a", UID: types.UID("uid-1")},
		Spec: v1alpha1.LlamaStackDistributionSpec{
			Replicas: 1,
			Server: v1alpha1.ServerSpec{
				Distribution: v1alpha1.DistributionType{Name: "starter"},
			},
		},
	}
	if mutate != nil {
		mutate(l)
	}
	return l
}

func defaultInputs() revision.Inputs {
	return revision.Inputs{Image: testImage, Replicas: ptr.To(int32(1)), ServerVersion: "0.7.1"}
}

func withUserConfig(in revision.Inputs) revision.Inputs {
	in.UserConfigMap = "my-config"
	in.UserConfigHash = "sha256:abc"
	return in
}

func serverOf(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	return d.Spec.Template.Spec.Containers[0]
}

func envNames(env []corev1.EnvVar) []string {
	names := make([]string, 0, len(env))
	for _, e := range env {
		names = append(names, e.Name)
	}
	return names
}

func envValue(t *testing.T, env []corev1.EnvVar, name string) string {
	t.Helper()
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	t.Fatalf("env %s not set", name)
	return ""
}

func defaultSpread() []corev1.TopologySpreadConstraint {
	var out []corev1.TopologySpreadConstraint
	for _, key := range []string{"topology.kubernetes.io/region", "topology.kubernetes.io/zone", "kubernetes.io/hostname"} {
		out = append(out, corev1.TopologySpreadConstraint{
			MaxSkew:           1,
			TopologyKey:       key,
			WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": "demo"}},
		})
	}
	return out
}

func defaultAntiAffinity() *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				TopologyKey:   "kubernetes.io/hostname",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": "demo"}},
			},
		}},
	}}
}

// wantDeployment is the Deployment NewDeployment builds for testLLSD(nil) and
// defaultInputs(), spelled out, then changed by each edit (c is its server container).
func wantDeployment(edits ...func(d *appsv1.Deployment, c *corev1.Container)) *appsv1.Deployment {
	quarter := intstr.FromString("25%")
	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "demo",
			Namespace: "team-a",
			Labels: map[string]string{
				"app":                          "llama-stack",
				"app.kubernetes.io/instance":   "demo",
				"app.kubernetes.io/managed-by": "llama-stack-operator",
				"app.kubernetes.io/part-of":    "llama-stack",
			},
			Annotations: map[string]string{"llamastack.io/distribution": "starter", "llamastack.io/image": testImage},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         "llamastack.io/v1alpha1",
				Kind:               "LlamaStackDistribution",
				Name:               "demo",
				UID:                "uid-1",
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "llama-stack", "app.kubernetes.io/instance": "demo"}},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &quarter, MaxSurge: &quarter},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: map[string]string{"app": "llama-stack", "app.kubernetes.io/instance": "demo"},
				},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					// Spread at any replica count: scaling never changes the template.
					TopologySpreadConstraints: defaultSpread(),
					Affinity:                  defaultAntiAffinity(),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To(int64(1001)),
						FSGroup:        ptr.To(int64(1001)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Volumes: []corev1.Volume{{
						Name:         "lls-storage",
						VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
					}},
					Containers: []corev1.Container{{
						Name:  "llama-stack",
						Image: testImage,
						Ports: []corev1.ContainerPort{{ContainerPort: 8321, Protocol: corev1.ProtocolTCP}},
						Env: []corev1.EnvVar{
							{Name: "HF_HOME", Value: "/.llama"},
							{Name: "LLS_WORKERS", Value: "1"},
							{Name: "LLS_PORT", Value: "8321"},
							{Name: "LLAMA_STACK_CONFIG", Value: "/etc/llama-stack/config.yaml"},
						},
						StartupProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Path: "/v1/health",
								Port: intstr.FromInt32(8321),
							}},
							InitialDelaySeconds: 15,
							TimeoutSeconds:      30,
							FailureThreshold:    3,
							SuccessThreshold:    1,
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Path: "/v1/health",
								Port: intstr.FromInt32(8321),
							}},
							PeriodSeconds:    10,
							TimeoutSeconds:   5,
							FailureThreshold: 3,
							SuccessThreshold: 1,
						},
						LivenessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Path: "/v1/health",
								Port: intstr.FromInt32(8321),
							}},
							PeriodSeconds:    30,
							TimeoutSeconds:   10,
							FailureThreshold: 5,
							SuccessThreshold: 1,
						},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("1"),
							corev1.ResourceMemory: resource.MustParse("1Gi"),
						}},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "lls-storage", MountPath: "/.llama"}},
					}},
				},
			},
		},
	}
	for _, edit := range edits {
		edit(d, &d.Spec.Template.Spec.Containers[0])
	}
	return d
}

// setEnv sets the value of a variable the container already has.
func setEnv(c *corev1.Container, name, value string) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i].Value = value
			return
		}
	}
	panic("env " + name + " not set")
}

// wantUserConfig is what withUserConfig's inputs add: the hash annotation, the startup
// script and the ConfigMap's volume and mount.
func wantUserConfig(d *appsv1.Deployment, c *corev1.Container) {
	d.Spec.Template.Annotations = map[string]string{"configmap.hash/user-config": "sha256:abc"}
	c.Command = []string{"/bin/sh", "-c", StartupScript}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "user-config", MountPath: "/etc/llama-stack/", ReadOnly: true})
	d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{
		Name: "user-config",
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "my-config"},
		}},
	})
}

// storageVolume is the server's volume when storage is asked for: the CR's claim.
var storageVolume = corev1.Volume{
	Name: "lls-storage",
	VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
		ClaimName: "demo-pvc",
	}},
}

func TestNewDeployment(t *testing.T) {
	tests := map[string]struct {
		mutate func(*v1alpha1.LlamaStackDistribution)
		in     revision.Inputs
		want   *appsv1.Deployment
	}{
		"default CR": {
			in:   defaultInputs(),
			want: wantDeployment(),
		},
		"custom port": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.ContainerSpec.Port = 9000 },
			in:     defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				c.Ports = []corev1.ContainerPort{{ContainerPort: 9000, Protocol: corev1.ProtocolTCP}}
				setEnv(c, "LLS_PORT", "9000")
				c.StartupProbe.HTTPGet.Port = intstr.FromInt32(9000)
				c.ReadinessProbe.HTTPGet.Port = intstr.FromInt32(9000)
				c.LivenessProbe.HTTPGet.Port = intstr.FromInt32(9000)
			}),
		},
		"custom container name": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.ContainerSpec.Name = "server" },
			in:     defaultInputs(),
			want:   wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) { c.Name = "server" }),
		},
		"storage with the default mount path": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Storage = &v1alpha1.StorageSpec{} },
			in:     defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
				d.Spec.Template.Spec.Volumes = []corev1.Volume{storageVolume}
			}),
		},
		"storage with a custom mount path": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				size := resource.MustParse("20Gi")
				l.Spec.Server.Storage = &v1alpha1.StorageSpec{Size: &size, MountPath: "/data"}
			},
			in: defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
				d.Spec.Template.Spec.Volumes = []corev1.Volume{storageVolume}
				setEnv(c, "HF_HOME", "/data")
				c.VolumeMounts = []corev1.VolumeMount{{Name: "lls-storage", MountPath: "/data"}}
			}),
		},
		"four workers": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Workers = ptr.To(int32(4)) },
			in:     defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				setEnv(c, "LLS_WORKERS", "4")
				c.Resources = corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("1Gi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				}
			}),
		},
		"user resources kept": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.ContainerSpec.Resources = corev1.ResourceRequirements{
					Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("500m"),
						corev1.ResourceMemory: resource.MustParse("4Gi"),
					},
					Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")},
				}
			},
			in: defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				c.Resources = corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("4Gi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")},
				}
			}),
		},
		"user resources with workers: zero request defaulted, missing limit follows the request": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.Workers = ptr.To(int32(2))
				l.Spec.Server.ContainerSpec.Resources = corev1.ResourceRequirements{
					Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("0"),
						corev1.ResourceMemory: resource.MustParse("2Gi"),
					},
					Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")},
				}
			},
			in: defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				setEnv(c, "LLS_WORKERS", "2")
				c.Resources = corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("2Gi")},
				}
			}),
		},
		"user config": {
			in:   withUserConfig(defaultInputs()),
			want: wantDeployment(wantUserConfig),
		},
		"command and args without user config": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.ContainerSpec.Command = []string{"my-server"}
				l.Spec.Server.ContainerSpec.Args = []string{"--verbose"}
			},
			in: defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				c.Command = []string{"my-server"}
				c.Args = []string{"--verbose"}
			}),
		},
		"args only without user config keep the image entrypoint": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.ContainerSpec.Args = []string{"--verbose"} },
			in:     defaultInputs(),
			want:   wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) { c.Args = []string{"--verbose"} }),
		},
		"command replaces the startup script with user config": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.ContainerSpec.Command = []string{"python3", "-m", "custom"}
			},
			in: withUserConfig(defaultInputs()),
			want: wantDeployment(wantUserConfig, func(d *appsv1.Deployment, c *corev1.Container) {
				c.Command = []string{"python3", "-m", "custom"}
			}),
		},
		"args with user config keep the startup script": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.ContainerSpec.Args = []string{"--x"} },
			in:     withUserConfig(defaultInputs()),
			want:   wantDeployment(wantUserConfig, func(d *appsv1.Deployment, c *corev1.Container) { c.Args = []string{"--x"} }),
		},
		"user env follows the controller's": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{
					{Name: "OLLAMA_URL", Value: "http://ollama:11434"},
					{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "token",
					}}},
				}
			},
			in: defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				c.Env = append(c.Env,
					corev1.EnvVar{Name: "OLLAMA_URL", Value: "http://ollama:11434"},
					corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "token",
					}}})
			}),
		},
		"user HF_HOME replaces the controller's": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{
					{Name: "A", Value: "a"},
					{Name: "HF_HOME", Value: "/models"},
				}
			},
			in: defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				c.Env = []corev1.EnvVar{
					{Name: "LLS_WORKERS", Value: "1"},
					{Name: "LLS_PORT", Value: "8321"},
					{Name: "LLAMA_STACK_CONFIG", Value: "/etc/llama-stack/config.yaml"},
					{Name: "A", Value: "a"},
					{Name: "HF_HOME", Value: "/models"},
				}
			}),
		},
		"repeated user variable keeps the last value once": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.ContainerSpec.Env = []corev1.EnvVar{
					{Name: "A", Value: "first"},
					{Name: "B", Value: "b"},
					{Name: "A", Value: "last"},
					{Name: "LLS_PORT", Value: "1"},
					{Name: "LLS_PORT", Value: "2"},
				}
			},
			in: defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				c.Env = []corev1.EnvVar{
					{Name: "HF_HOME", Value: "/.llama"},
					{Name: "LLS_WORKERS", Value: "1"},
					{Name: "LLAMA_STACK_CONFIG", Value: "/etc/llama-stack/config.yaml"},
					{Name: "A", Value: "last"},
					{Name: "B", Value: "b"},
					{Name: "LLS_PORT", Value: "2"},
				}
			}),
		},
		"service account keeps the token mount default": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{ServiceAccountName: "llama-sa"}
			},
			in: defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				d.Spec.Template.Spec.ServiceAccountName = "llama-sa"
				d.Spec.Template.Spec.DeprecatedServiceAccount = "llama-sa"
				d.Spec.Template.Spec.AutomountServiceAccountToken = nil
			}),
		},
		"termination grace period zero": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{TerminationGracePeriodSeconds: ptr.To(int64(0))}
			},
			in: defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(int64(0))
			}),
		},
		"termination grace period set": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{TerminationGracePeriodSeconds: ptr.To(int64(120))}
			},
			in: defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(int64(120))
			}),
		},
		"empty pod overrides change nothing": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{} },
			in:     defaultInputs(),
			want:   wantDeployment(),
		},
		"override volumes and mounts follow the controller's": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{
					Volumes: []corev1.Volume{{
						Name:         "models",
						VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}},
					}},
					VolumeMounts: []corev1.VolumeMount{{Name: "models", MountPath: "/models"}},
				}
			},
			in: withUserConfig(defaultInputs()),
			want: wantDeployment(wantUserConfig, func(d *appsv1.Deployment, c *corev1.Container) {
				d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{
					Name:         "models",
					VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}},
				})
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "models", MountPath: "/models"})
			}),
		},
		"security context overrides": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{
					SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(2000))},
				}
				l.Spec.Server.ContainerSpec.SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)}
			},
			in: defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				d.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(2000))}
				c.SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)}
				// A read-only root gets a writable /tmp: the server's CLI writes its resolved config there.
				d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes[:1], append([]corev1.Volume{{
					Name: "lls-tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
				}}, d.Spec.Template.Spec.Volumes[1:]...)...)
				c.VolumeMounts = append(c.VolumeMounts[:1], append([]corev1.VolumeMount{{Name: "lls-tmp", MountPath: "/tmp"}}, c.VolumeMounts[1:]...)...)
			}),
		},
		"a read-only root with the user's own /tmp": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.ContainerSpec.SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)}
				l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{
					Volumes:      []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
					VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/tmp/"}},
				}
			},
			in: defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				c.SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)}
				d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes, corev1.Volume{
					Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "scratch", MountPath: "/tmp/"})
			}),
		},
		"more than one replica spreads the pods": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Replicas = 3 },
			in:     revision.Inputs{Image: testImage, Replicas: ptr.To(int32(3)), ServerVersion: "0.7.1"},
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				d.Spec.Replicas = ptr.To(int32(3))
				d.Spec.Template.Spec.TopologySpreadConstraints = defaultSpread()
				d.Spec.Template.Spec.Affinity = defaultAntiAffinity()
			}),
		},
		"one replica is spread as more would be": {
			in:   defaultInputs(),
			want: wantDeployment(),
		},
		"custom spread with one replica": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
					MaxSkew: 2, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule,
				}}
			},
			in: defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
					MaxSkew: 2, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule,
				}}
			}),
		},
		"custom spread with more than one replica": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Replicas = 2
				l.Spec.Server.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
					MaxSkew: 2, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule,
				}}
			},
			in: defaultInputs(),
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) {
				d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
					MaxSkew: 2, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule,
				}}
				d.Spec.Template.Spec.Affinity = defaultAntiAffinity()
			}),
		},
		"replicas left to an autoscaler": {
			mutate: func(l *v1alpha1.LlamaStackDistribution) {
				l.Spec.Server.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 5}
			},
			in:   revision.Inputs{Image: testImage, ServerVersion: "0.7.1"},
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) { d.Spec.Replicas = nil }),
		},
		"replicas set from the inputs": {
			in:   revision.Inputs{Image: testImage, Replicas: ptr.To(int32(0)), ServerVersion: "0.7.1"},
			want: wantDeployment(func(d *appsv1.Deployment, c *corev1.Container) { d.Spec.Replicas = ptr.To(int32(0)) }),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := NewDeployment(hub(testLLSD(tc.mutate)), tc.in)
			require.NotNil(t, d)
			// Whatever the CR says, the env never holds a name twice.
			names := envNames(serverOf(t, d).Env)
			seen := map[string]bool{}
			for _, n := range names {
				assert.Falsef(t, seen[n], "env %s appears twice in %v", n, names)
				seen[n] = true
			}
			if diff := cmp.Diff(tc.want, d); diff != "" {
				t.Errorf("NewDeployment() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// fullLLSD sets every field the builder reads, so that aliasing shows up anywhere.
func fullLLSD(l *v1alpha1.LlamaStackDistribution) {
	size := resource.MustParse("5Gi")
	l.Spec.Replicas = 2
	l.Spec.Server.Workers = ptr.To(int32(2))
	l.Spec.Server.Storage = &v1alpha1.StorageSpec{Size: &size, MountPath: "/data"}
	l.Spec.Server.ContainerSpec = v1alpha1.ContainerSpec{
		Name: "srv",
		Port: 9000,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
		},
		Env: []corev1.EnvVar{
			{Name: "A", Value: "1"},
			{Name: "A", Value: "2"},
			{Name: "S", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k",
			}}},
		},
		Command:         []string{"run"},
		Args:            []string{"--flag"},
		SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To(int64(5))},
	}
	l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{
		ServiceAccountName:            "sa",
		TerminationGracePeriodSeconds: ptr.To(int64(10)),
		Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}},
		}}},
		VolumeMounts:    []corev1.VolumeMount{{Name: "v", MountPath: "/v"}},
		SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To(int64(7))},
	}
	l.Spec.Server.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
	}}
}

func TestNewDeploymentDoesNotMutateOrAliasItsInput(t *testing.T) {
	tests := map[string]struct {
		mutate func(*v1alpha1.LlamaStackDistribution)
		in     revision.Inputs
	}{
		"default CR":          {in: defaultInputs()},
		"every field set":     {mutate: fullLLSD, in: withUserConfig(defaultInputs())},
		"workers without res": {mutate: func(l *v1alpha1.LlamaStackDistribution) { l.Spec.Server.Workers = ptr.To(int32(3)) }, in: defaultInputs()},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l := testLLSD(tc.mutate)
			before := l.DeepCopy()
			d := NewDeployment(hub(l), tc.in)
			assert.Equal(t, before, l, "NewDeployment changed its input")

			// Scribble over everything the output holds; the CR must not see it.
			pod := &d.Spec.Template.Spec
			c := &pod.Containers[0]
			for i := range c.Env {
				c.Env[i].Value = "changed"
				if c.Env[i].ValueFrom != nil && c.Env[i].ValueFrom.ConfigMapKeyRef != nil {
					c.Env[i].ValueFrom.ConfigMapKeyRef.Key = "changed"
				}
			}
			for i := range c.Command {
				c.Command[i] = "changed"
			}
			for i := range c.Args {
				c.Args[i] = "changed"
			}
			c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("99")
			c.Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("1")
			if c.Resources.Limits != nil {
				c.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("99Gi")
			}
			c.SecurityContext.RunAsUser = ptr.To(int64(99))
			pod.SecurityContext.FSGroup = ptr.To(int64(99))
			for i := range c.VolumeMounts {
				c.VolumeMounts[i].MountPath = "/changed"
			}
			for i := range pod.Volumes {
				pod.Volumes[i].Name = "changed"
				if cm := pod.Volumes[i].ConfigMap; cm != nil {
					cm.Name = "changed"
				}
			}
			for i := range pod.TopologySpreadConstraints {
				pod.TopologySpreadConstraints[i].TopologyKey = "changed"
				pod.TopologySpreadConstraints[i].LabelSelector.MatchLabels["x"] = "y"
			}
			if pod.TerminationGracePeriodSeconds != nil {
				*pod.TerminationGracePeriodSeconds = 99
			}
			if d.Spec.Replicas != nil {
				*d.Spec.Replicas = 99
			}
			assert.Equal(t, before, l, "NewDeployment output aliases its input")
			if tc.in.Replicas != nil {
				assert.NotEqual(t, int32(99), *tc.in.Replicas, "replicas aliased")
			}
		})
	}
}

func TestMergeEnv(t *testing.T) {
	controller := []corev1.EnvVar{{Name: "X", Value: "cx"}, {Name: "Y", Value: "cy"}}
	tests := map[string]struct {
		user []corev1.EnvVar
		want []corev1.EnvVar
	}{
		"no user variables": {
			want: []corev1.EnvVar{{Name: "X", Value: "cx"}, {Name: "Y", Value: "cy"}},
		},
		"user variables appended": {
			user: []corev1.EnvVar{{Name: "B", Value: "b"}, {Name: "A", Value: "a"}},
			want: []corev1.EnvVar{{Name: "X", Value: "cx"}, {Name: "Y", Value: "cy"}, {Name: "B", Value: "b"}, {Name: "A", Value: "a"}},
		},
		"user replaces a controller variable": {
			user: []corev1.EnvVar{{Name: "X", Value: "ux"}},
			want: []corev1.EnvVar{{Name: "Y", Value: "cy"}, {Name: "X", Value: "ux"}},
		},
		"last repeat wins at the first position": {
			user: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "b"}, {Name: "A", Value: "2"}, {Name: "A", Value: "3"}},
			want: []corev1.EnvVar{{Name: "X", Value: "cx"}, {Name: "Y", Value: "cy"}, {Name: "A", Value: "3"}, {Name: "B", Value: "b"}},
		},
		"repeat switching from value to valueFrom": {
			user: []corev1.EnvVar{
				{Name: "A", Value: "1"},
				{Name: "A", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			},
			want: []corev1.EnvVar{
				{Name: "X", Value: "cx"}, {Name: "Y", Value: "cy"},
				{Name: "A", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, mergeEnv(controller, tc.user))
		})
	}
}

// startupScriptBranches returns the commands of the case branches of StartupScript.
func startupScriptBranches(t *testing.T) map[string]string {
	t.Helper()
	lines := strings.Split(StartupScript, "\n")
	branches := map[string]string{}
	label := ""
	inCase := false
	for _, line := range lines {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "case "):
			inCase = true
		case line == "esac":
			inCase = false
		case !inCase || line == "" || line == ";;":
		case strings.HasSuffix(line, ")"):
			label = strings.TrimSuffix(line, ")")
		default:
			require.NotEmpty(t, label, "command outside a branch: %q", line)
			require.NotContains(t, branches, label, "branch %s has more than one command", label)
			branches[label] = line
		}
	}
	return branches
}

func TestStartupScriptExecsInEveryBranch(t *testing.T) {
	branches := startupScriptBranches(t)
	assert.Equal(t, map[string]string{
		"distribution": "exec python3 -m llama_stack.distribution.server.server --config /etc/llama-stack/config.yaml",
		"core":         "exec python3 -m llama_stack.core.server.server /etc/llama-stack/config.yaml",
		"*":            `exec uvicorn llama_stack.core.server.server:create_app --host 0.0.0.0 --port "${LLS_PORT:-8321}" --workers "${LLS_WORKERS:-1}" --factory`,
	}, branches)
	for label, cmd := range branches {
		assert.Truef(t, strings.HasPrefix(cmd, "exec "), "branch %s does not exec: %s", label, cmd)
	}
	assert.Contains(t, StartupScript, fmt.Sprintf("${LLS_PORT:-%d}", llsd.DefaultPort))
	assert.Contains(t, serverVersionProbe, "importlib.metadata.version('llama_stack')")
	assert.Contains(t, serverVersionProbe, "base_version")
	// The probe sits inside a double-quoted sh string.
	assert.NotContains(t, serverVersionProbe, `"`)
	assert.NotContains(t, serverVersionProbe, `$`)
	assert.NotContains(t, serverVersionProbe, "`")
	assert.NotContains(t, serverVersionProbe, `\`)
}

// fakeTools writes executables into a new directory: python3 answers the version
// probe with $FAKE_MODE (or fails when it is "fail") and otherwise, like uvicorn,
// prints its PID and arguments.
func fakeTools(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	python := `#!/bin/sh
if [ "$1" = "-c" ]; then
  [ "$FAKE_MODE" = fail ] && exit 1
  echo "$FAKE_MODE"
  exit 0
fi
echo "$$ python3 $*"
`
	uvicorn := "#!/bin/sh\necho \"$$ uvicorn $*\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "python3"), []byte(python), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "uvicorn"), []byte(uvicorn), 0o755))
	return dir
}

func TestStartupScriptRuns(t *testing.T) {
	d := NewDeployment(hub(testLLSD(nil)), withUserConfig(defaultInputs()))
	command := serverOf(t, d).Command
	require.Len(t, command, 3)
	dir := fakeTools(t)

	uvicornDefault := "uvicorn llama_stack.core.server.server:create_app --host 0.0.0.0 --port 8321 --workers 1 --factory"
	tests := map[string]struct {
		mode string
		env  []string
		want string
	}{
		"before 0.2.17": {mode: "distribution", want: "python3 -m llama_stack.distribution.server.server --config /etc/llama-stack/config.yaml"},
		"before 0.3.0":  {mode: "core", want: "python3 -m llama_stack.core.server.server /etc/llama-stack/config.yaml"},
		"0.3.0 or later": {
			mode: "uvicorn", want: uvicornDefault,
		},
		"detection fails": {mode: "fail", want: uvicornDefault},
		"port and workers from the environment": {
			mode: "uvicorn",
			env:  []string{"LLS_PORT=9000", "LLS_WORKERS=4"},
			want: "uvicorn llama_stack.core.server.server:create_app --host 0.0.0.0 --port 9000 --workers 4 --factory",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(command[0], command[1:]...)
			cmd.Env = append([]string{"PATH=" + dir, "FAKE_MODE=" + tc.mode}, tc.env...)
			var out strings.Builder
			cmd.Stdout = &out
			require.NoError(t, cmd.Run())
			// exec keeps the shell's PID: the server is the process the kubelet started.
			assert.Equal(t, fmt.Sprintf("%d %s\n", cmd.Process.Pid, tc.want), out.String())
		})
	}
}

// On OpenShift the restricted-v2 SCC assigns the user and fsGroup from the namespace's
// range, so the defaults leave them out and keep the rest; a user's securityContext wins
// everywhere.
func TestPodSecurityContextOnOpenShift(t *testing.T) {
	restricted := func(user, group *int64) *corev1.PodSecurityContext {
		return &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      user,
			FSGroup:        group,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
	}
	users := &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(1000650000)), FSGroup: ptr.To(int64(1000650000))}
	withUsers := func(l *v1alpha1.LlamaStackDistribution) {
		l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{SecurityContext: users.DeepCopy()}
	}
	tests := map[string]struct {
		openShift bool
		mutate    func(*v1alpha1.LlamaStackDistribution)
		want      *corev1.PodSecurityContext
	}{
		"elsewhere: user and fsGroup 1001":      {false, nil, restricted(ptr.To(int64(1001)), ptr.To(int64(1001)))},
		"on OpenShift: the SCC picks them":      {true, nil, restricted(nil, nil)},
		"on OpenShift, the user's context wins": {true, withUsers, users},
		"elsewhere, the user's context wins":    {false, withUsers, users},
		"on OpenShift, other overrides change none": {true, func(l *v1alpha1.LlamaStackDistribution) {
			l.Spec.Server.PodOverrides = &v1alpha1.PodOverrides{ServiceAccountName: "sa"}
		}, restricted(nil, nil)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := defaultInputs()
			in.OpenShift = tc.openShift
			d := NewDeployment(hub(testLLSD(tc.mutate)), in)
			assert.Equal(t, tc.want, d.Spec.Template.Spec.SecurityContext)
			// The container's restricted defaults are the same everywhere.
			assert.Equal(t, &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			}, serverOf(t, d).SecurityContext)
		})
	}
}

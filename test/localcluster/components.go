package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// AdmissionPlugins are enabled on the apiserver: the plugins kube-apiserver
// 1.37 enables by default (kube-apiserver --help, --enable-admission-plugins)
// plus NodeRestriction, as a kubeadm cluster has them. Listing the defaults
// keeps them on even if a later release changes its default set.
var AdmissionPlugins = []string{
	"NamespaceLifecycle",
	"LimitRanger",
	"ServiceAccount",
	"TaintNodesByCondition",
	"PodSecurity",
	"Priority",
	"DefaultTolerationSeconds",
	"DefaultStorageClass",
	"StorageObjectInUseProtection",
	"PodGroupProtection",
	"PersistentVolumeClaimResize",
	"RuntimeClass",
	"CertificateApproval",
	"CertificateSigning",
	"ClusterTrustBundleAttest",
	"CertificateSubjectRestriction",
	"DefaultIngressClass",
	"PodTopologyLabels",
	"NodeDeclaredFeatureValidator",
	"PodResizeValidator",
	"MutatingAdmissionPolicy",
	"MutatingAdmissionWebhook",
	"ValidatingAdmissionPolicy",
	"ValidatingAdmissionWebhook",
	"ResourceQuota",
	"NodeRestriction",
}

// Files in the run dir besides the PKI and the logs.
const (
	kcmKubeconfigFile       = "kube-controller-manager.kubeconfig"
	schedulerKubeconfigFile = "kube-scheduler.kubeconfig"
	kwokKubeconfigFile      = "kwok.kubeconfig"
	schedulerConfigFile     = "kube-scheduler.yaml"
)

func (c *Cluster) path(name string) string { return filepath.Join(c.runDir, name) }

// writeConfigFiles writes the admin kubeconfig, one kubeconfig per component
// identity and the scheduler configuration.
func (c *Cluster) writeConfigFiles() error {
	kubeconfigs := []struct {
		path, user string
		creds      keyPair
	}{
		{c.kubeconfig, "local-admin", c.pki.admin},
		{c.path(kcmKubeconfigFile), "system:kube-controller-manager", c.pki.kcm},
		{c.path(schedulerKubeconfigFile), "system:kube-scheduler", c.pki.scheduler},
		{c.path(kwokKubeconfigFile), "kwok-controller", c.pki.kwok},
	}
	for _, kc := range kubeconfigs {
		if err := c.writeKubeconfig(kc.path, kc.user, kc.creds); err != nil {
			return fmt.Errorf("kubeconfig %s: %w", kc.path, err)
		}
	}
	schedulerConfig := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
`, strconv.Quote(c.path(schedulerKubeconfigFile)))
	return os.WriteFile(c.path(schedulerConfigFile), []byte(schedulerConfig), 0o600)
}

// writeKubeconfig writes a kubeconfig with the CA and the client credentials
// embedded, so the file can be copied elsewhere.
func (c *Cluster) writeKubeconfig(path, user string, creds keyPair) error {
	const name = "llsc-local"
	cfg := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server = c.apiServerURL()
	cluster.CertificateAuthorityData = c.pki.ca.CertPEM
	cfg.Clusters[name] = cluster
	auth := clientcmdapi.NewAuthInfo()
	auth.ClientCertificateData = creds.CertPEM
	auth.ClientKeyData = creds.KeyPEM
	cfg.AuthInfos[user] = auth
	kctx := clientcmdapi.NewContext()
	kctx.Cluster = name
	kctx.AuthInfo = user
	cfg.Contexts[name] = kctx
	cfg.CurrentContext = name
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

func (c *Cluster) etcdArgs() []string {
	client := "http://127.0.0.1:" + strconv.Itoa(c.ports[PortEtcdClient])
	peer := "http://127.0.0.1:" + strconv.Itoa(c.ports[PortEtcdPeer])
	args := []string{
		"--name=local",
		"--data-dir=" + c.path("etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=local=" + peer,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
	return append(args, c.opts.ExtraEtcdArgs...)
}

func (c *Cluster) apiServerArgs() []string {
	p := c.pki
	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.ports[PortAPIServer]),
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(c.ports[PortEtcdClient]),
		"--tls-cert-file=" + p.serverCert,
		"--tls-private-key-file=" + p.serverKey,
		"--client-ca-file=" + p.caFile,
		"--requestheader-client-ca-file=" + p.caFile,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.proxyCert,
		"--proxy-client-key-file=" + p.proxyKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPubFile,
		"--service-account-signing-key-file=" + p.saKeyFile,
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=" + strings.Join(AdmissionPlugins, ","),
		"--allow-privileged=true",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--cert-dir=" + c.path("apiserver-certs"),
	}
	return append(args, c.opts.ExtraAPIServerArgs...)
}

func (c *Cluster) controllerManagerArgs() []string {
	kc := c.path(kcmKubeconfigFile)
	args := []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.ports[PortKCM]),
		"--leader-elect=false",
		"--service-account-private-key-file=" + c.pki.saKeyFile,
		"--root-ca-file=" + c.pki.caFile,
		"--use-service-account-credentials=true",
		"--cluster-signing-cert-file=" + c.pki.caFile,
		"--cluster-signing-key-file=" + c.pki.caKeyFile,
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		"--profiling=false",
	}
	return append(args, c.opts.ExtraControllerManagerArgs...)
}

func (c *Cluster) schedulerArgs() []string {
	kc := c.path(schedulerKubeconfigFile)
	args := []string{
		"--config=" + c.path(schedulerConfigFile),
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.ports[PortScheduler]),
		"--profiling=false",
	}
	return append(args, c.opts.ExtraSchedulerArgs...)
}

func (c *Cluster) kwokArgs() []string {
	args := []string{
		"--kubeconfig=" + c.path(kwokKubeconfigFile),
		"--config=" + c.opts.StagesFile,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + FakeNodeAnnotation + "=" + FakeNodeValue,
		"--cidr=" + PodCIDR,
		"--node-ip=127.0.0.1",
		"--node-lease-duration-seconds=40",
	}
	return append(args, c.opts.ExtraKwokArgs...)
}

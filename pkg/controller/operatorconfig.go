package controller

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// OperatorConfigMapName is the ConfigMap, in the operator namespace, that holds
// featureFlags and image-overrides (as upstream).
const OperatorConfigMapName = "llama-stack-operator-config"

const (
	keyFeatureFlags   = "featureFlags"
	keyImageOverrides = "image-overrides"
)

//go:embed distributions.json
var distributionsJSON []byte

// builtinDistributions returns a fresh copy of the embedded distribution → image map.
func builtinDistributions() map[string]string {
	m := map[string]string{}
	if err := json.Unmarshal(distributionsJSON, &m); err != nil {
		panic(fmt.Sprintf("embedded distributions.json: %v", err))
	}
	return m
}

// operatorConfig is the parsed operator ConfigMap: an immutable value made per sync, so
// workers share no mutable state.
type operatorConfig struct {
	// networkPolicyKnown is false when featureFlags does not parse: existing
	// NetworkPolicies are then left as they are rather than deleted.
	networkPolicyKnown  bool
	enableNetworkPolicy bool
	// overridesInvalid is true when image-overrides does not parse: every existing
	// Deployment keeps its image, new ones get the default.
	overridesInvalid bool
	imageOverrides   map[string]string
	// problems lists what is wrong with the ConfigMap, for an Event and the log.
	problems []string
}

type featureFlags struct {
	EnableNetworkPolicy struct {
		Enabled bool `json:"enabled"`
	} `json:"enableNetworkPolicy"`
}

// parseOperatorConfig reads the operator ConfigMap; nil gives the built-in defaults.
func parseOperatorConfig(cm *corev1.ConfigMap) operatorConfig {
	cfg := operatorConfig{networkPolicyKnown: true}
	if cm == nil {
		return cfg
	}
	if raw, ok := cm.Data[keyFeatureFlags]; ok && strings.TrimSpace(raw) != "" {
		var ff featureFlags
		if err := yaml.Unmarshal([]byte(raw), &ff); err != nil {
			cfg.networkPolicyKnown = false
			cfg.problems = append(cfg.problems, fmt.Sprintf("key %s is not valid YAML (%v); NetworkPolicies are left as they are", keyFeatureFlags, err))
		} else {
			cfg.enableNetworkPolicy = ff.EnableNetworkPolicy.Enabled
		}
	}
	if raw, ok := cm.Data[keyImageOverrides]; ok && strings.TrimSpace(raw) != "" {
		var overrides map[string]string
		if err := yaml.Unmarshal([]byte(raw), &overrides); err != nil {
			cfg.overridesInvalid = true
			cfg.problems = append(cfg.problems, fmt.Sprintf("key %s is not valid YAML (%v); running images are kept", keyImageOverrides, err))
		} else {
			for _, name := range slices.Sorted(maps.Keys(overrides)) {
				image := strings.TrimSpace(overrides[name])
				if !validImageReference(image) {
					cfg.problems = append(cfg.problems, fmt.Sprintf("key %s: %q for distribution %q is not a valid image reference; entry skipped", keyImageOverrides, image, name))
					continue
				}
				if cfg.imageOverrides == nil {
					cfg.imageOverrides = map[string]string{}
				}
				cfg.imageOverrides[name] = image
			}
		}
	}
	return cfg
}

// An image reference: [host[:port]/]path[:tag][@digest], as the distribution reference grammar.
var imageReferenceRE = func() *regexp.Regexp {
	const (
		component = `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*`
		domain    = `(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?`
		tag       = `[\w][\w.-]{0,127}`
		digest    = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	)
	return regexp.MustCompile(`^(?:` + domain + `/)?` + component + `(?:/` + component + `)*(?::` + tag + `)?(?:@` + digest + `)?$`)
}()

func validImageReference(s string) bool {
	return len(s) <= 4096 && imageReferenceRE.MatchString(s)
}

// currentOperatorConfig parses the operator ConfigMap from the cache.
func (c *Controller) currentOperatorConfig() operatorConfig {
	cm, err := c.operatorConfig.ConfigMaps(c.operatorNamespace).Get(OperatorConfigMapName)
	if err != nil {
		return parseOperatorConfig(nil)
	}
	return parseOperatorConfig(cm)
}

package revision

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/configgen"
)

// OperatorConfigMapName is the ConfigMap, in the operator namespace, that holds
// featureFlags and image-overrides (as upstream).
const OperatorConfigMapName = "llama-stack-operator-config"

// The keys of the operator ConfigMap.
const (
	KeyFeatureFlags   = "featureFlags"
	KeyImageOverrides = "image-overrides"
)

// BuiltinDistributions returns a fresh map of each named distribution to its pinned
// image, from configgen's table (the one table of named distributions).
func BuiltinDistributions() map[string]string {
	m := map[string]string{}
	for _, d := range configgen.Distributions() {
		m[d.Name] = d.Image
	}
	return m
}

// OperatorConfig is the parsed operator ConfigMap: an immutable value made per sync, so
// workers share no mutable state. What the ConfigMap does not say clearly (it is missing,
// a key does not parse, has an unknown key or a value of the wrong type) changes nothing
// that runs: it is invalid input, reported on the ConfigMap, never read as a default
// that deletes a NetworkPolicy or rolls a Deployment.
type OperatorConfig struct {
	// NetworkPolicyKnown is false when featureFlags cannot be read or does not set
	// enableNetworkPolicy.enabled to a boolean: existing NetworkPolicies are then left
	// as they are (neither made nor deleted).
	NetworkPolicyKnown  bool
	EnableNetworkPolicy bool
	// ServiceMonitorKnown is false when the ConfigMap is missing, featureFlags cannot
	// be read or enableServiceMonitor.enabled is there but not a boolean: existing
	// ServiceMonitors are then left as they are. Otherwise they are made unless
	// enableServiceMonitor.enabled is false.
	ServiceMonitorKnown  bool
	EnableServiceMonitor bool
	// ImageOverrides are the valid entries of image-overrides.
	ImageOverrides map[string]string
	// KeepAllImages is true when image-overrides cannot be read as a whole (or has an
	// entry for a distribution that does not exist, which may be a typo of one that
	// does): a running Deployment of a distribution without a valid entry keeps its
	// image; new ones get the built-in image.
	KeepAllImages bool
	// KeepImages are the distributions whose entry is invalid: their running
	// Deployments keep their image.
	KeepImages map[string]bool
	// Missing is true when the ConfigMap does not exist.
	Missing bool
	// Problems lists what is wrong with the ConfigMap, for an Event and the log.
	Problems []string
}

// keepsImage tells whether a running Deployment of the distribution keeps its image
// because image-overrides does not say clearly which image it should run.
func (cfg OperatorConfig) keepsImage(distribution string) bool {
	if _, ok := cfg.ImageOverrides[distribution]; ok {
		return false
	}
	return cfg.KeepAllImages || cfg.KeepImages[distribution]
}

// keepsRunningImage tells whether a Deployment of the distribution that runs image
// (as Resolver.RunningImage reads it; "" for none) keeps it. It does while image-overrides
// does not say clearly which image it should run (keepsImage), with one exception:
// without an operator ConfigMap, an image an earlier release of the controller ran
// for the distribution by default (its :latest, before names were pinned) is that
// release's built-in image, not a choice of image-overrides that went with the
// ConfigMap, so it moves to this release's built-in one, as it does with a ConfigMap
// that sets no override. A ConfigMap that exists but cannot be read keeps even those:
// it may have named that image.
func (cfg OperatorConfig) keepsRunningImage(distribution, image string) bool {
	if image == "" || !cfg.keepsImage(distribution) {
		return false
	}
	if cfg.Missing {
		if d, ok := configgen.LookupDistribution(distribution); ok && slices.Contains(d.EarlierImages, image) {
			return false
		}
	}
	return true
}

// MissingOperatorConfig is what the controller goes by without an operator ConfigMap:
// nothing that runs changes (NetworkPolicies stay, running images stay, except an
// earlier release's built-in image: keepsRunningImage), and new CRs get the built-in
// defaults (no NetworkPolicy, the built-in image).
func MissingOperatorConfig() OperatorConfig {
	return OperatorConfig{Missing: true, KeepAllImages: true}
}

// ParseOperatorConfig reads the operator ConfigMap; nil is a missing one.
// distributions are the names image-overrides may override.
func ParseOperatorConfig(cm *corev1.ConfigMap, distributions map[string]string) OperatorConfig {
	if cm == nil {
		return MissingOperatorConfig()
	}
	cfg := OperatorConfig{NetworkPolicyKnown: true, ServiceMonitorKnown: true, EnableServiceMonitor: true}
	for _, k := range sortedKeys(cm.Data) {
		if k != KeyFeatureFlags && k != KeyImageOverrides {
			cfg.Problems = append(cfg.Problems, fmt.Sprintf("unknown key %q (known keys: %s, %s)%s", k, KeyFeatureFlags, KeyImageOverrides, typoConsequence(cm, k)))
		}
	}
	for _, k := range sortedKeys(cm.BinaryData) {
		cfg.Problems = append(cfg.Problems, fmt.Sprintf("binaryData key %q is not read: put %s and %s in data%s", k, KeyFeatureFlags, KeyImageOverrides, typoConsequence(cm, k)))
	}
	unknownKeys := len(cfg.Problems) > 0

	// Only an explicit enableNetworkPolicy.enabled decides: a ConfigMap that does not say
	// (no featureFlags, an empty one, enableNetworkPolicy: {}) is not a "disabled" that
	// deletes every NetworkPolicy.
	raw, ok := cm.Data[KeyFeatureFlags]
	flags, problem := parseFeatureFlags(raw)
	if flags.serviceMonitor != nil {
		cfg.EnableServiceMonitor = *flags.serviceMonitor
	}
	if !ok && unknownKeys {
		// A misspelt featureFlags may have said enableServiceMonitor: {enabled: false}.
		cfg.ServiceMonitorKnown, cfg.EnableServiceMonitor = false, false
	}
	if p := flags.invalid[FlagServiceMonitor]; p != "" {
		cfg.ServiceMonitorKnown, cfg.EnableServiceMonitor = false, false
		cfg.Problems = append(cfg.Problems, p+"; ServiceMonitors are left as they are (neither made nor deleted) until it says true or false")
	}
	switch {
	case problem != "":
		cfg.NetworkPolicyKnown, cfg.ServiceMonitorKnown, cfg.EnableServiceMonitor = false, false, false
		cfg.Problems = append(cfg.Problems, problem+"; NetworkPolicies and ServiceMonitors are left as they are until it is fixed")
	case flags.invalid[FlagNetworkPolicy] != "":
		cfg.NetworkPolicyKnown = false
		cfg.Problems = append(cfg.Problems, flags.invalid[FlagNetworkPolicy]+"; NetworkPolicies are left as they are (neither made nor deleted) until it says true or false")
	case flags.networkPolicy == nil:
		cfg.NetworkPolicyKnown = false
		if ok || !unknownKeys { // (a misspelt key is reported above)
			cfg.Problems = append(cfg.Problems, fmt.Sprintf(
				"key %s does not set enableNetworkPolicy.enabled; NetworkPolicies are left as they are until it says true or false", KeyFeatureFlags))
		}
	default:
		cfg.EnableNetworkPolicy = *flags.networkPolicy
	}

	if raw, ok := cm.Data[KeyImageOverrides]; ok && strings.TrimSpace(raw) != "" {
		parseImageOverrides(raw, distributions, &cfg)
	} else if !ok && unknownKeys {
		cfg.KeepAllImages = true
	}
	return cfg
}

// typoConsequence says what an unknown key costs when it may stand for a missing known one.
func typoConsequence(cm *corev1.ConfigMap, key string) string {
	var kept []string
	if _, ok := cm.Data[KeyFeatureFlags]; !ok {
		kept = append(kept, "NetworkPolicies", "ServiceMonitors")
	}
	if _, ok := cm.Data[KeyImageOverrides]; !ok {
		kept = append(kept, "running images")
	}
	if len(kept) == 0 {
		return "; it is ignored"
	}
	return "; " + joinAnd(kept) + " are left as they are until it is fixed"
}

// featureFlags are the flags featureFlags sets; nil where it does not say.
type featureFlags struct {
	networkPolicy  *bool
	serviceMonitor *bool
	// invalid are the flags whose enabled is not a boolean, each with its problem: they
	// do not say (their children are neither made nor deleted), the others still do.
	invalid map[string]string
}

// The flags of featureFlags, each a mapping with one field, enabled.
const (
	FlagNetworkPolicy  = "enableNetworkPolicy"
	FlagServiceMonitor = "enableServiceMonitor"
)

var knownFlags = []string{FlagNetworkPolicy, FlagServiceMonitor}

// FlagOff says, for the Event of a child deleted because of it, that flag is false.
func FlagOff(flag string) string {
	return fmt.Sprintf("%s %s.enabled is false in the operator ConfigMap", KeyFeatureFlags, flag)
}

// parseFeatureFlags reads featureFlags strictly: every key known, every value of its
// type. It returns the flags it sets, or a problem naming the key. It decodes YAML 1.2
// (go.yaml.in/yaml/v3), whose booleans are true and false (also spelt True, TRUE, False,
// FALSE): YAML 1.1's yes, no, on, off, y and n are strings there, so enabled: no is not
// read as false and turned into a deletion, but reported, as enabled: "false" is.
func parseFeatureFlags(raw string) (featureFlags, string) {
	var flags featureFlags
	if strings.TrimSpace(raw) == "" {
		return flags, ""
	}
	var doc any
	if err := yamlv3.Unmarshal([]byte(raw), &doc); err != nil {
		return flags, fmt.Sprintf("key %s is not valid YAML (%v)", KeyFeatureFlags, err)
	}
	const example = "enableNetworkPolicy: {enabled: true}"
	top, ok := yamlMapping(doc)
	if !ok {
		return flags, fmt.Sprintf("key %s must be a mapping such as %q, not %s", KeyFeatureFlags, example, yamlKind(doc))
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		var target **bool
		switch k {
		case FlagNetworkPolicy:
			target = &flags.networkPolicy
		case FlagServiceMonitor:
			target = &flags.serviceMonitor
		default:
			return featureFlags{}, fmt.Sprintf("key %s: unknown flag %q (known flags: %s)", KeyFeatureFlags, k, strings.Join(knownFlags, ", "))
		}
		flag, ok := yamlMapping(top[k])
		if !ok {
			return featureFlags{}, fmt.Sprintf("key %s: %s must be a mapping such as {enabled: true}, not %s", KeyFeatureFlags, k, yamlKind(top[k]))
		}
		for _, field := range slices.Sorted(maps.Keys(flag)) {
			if field != "enabled" {
				return featureFlags{}, fmt.Sprintf("key %s: unknown field %q in %s (known fields: enabled)", KeyFeatureFlags, field, k)
			}
			b, ok := flag[field].(bool)
			if !ok {
				if flags.invalid == nil {
					flags.invalid = map[string]string{}
				}
				flags.invalid[k] = fmt.Sprintf("key %s: %s.enabled must be true or false, not %s (valid values: true, false)",
					KeyFeatureFlags, k, yamlValue(flag[field]))
				continue
			}
			*target = &b
		}
	}
	return flags, ""
}

// yamlMapping is v as a mapping of string keys, when it is a mapping. yaml.v3 decodes a
// mapping with a key that is not a string (1: x, true: x) as map[any]any: its keys
// are named as written, for the messages of unknown keys.
func yamlMapping(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[fmt.Sprint(k)] = v
		}
		return out, true
	}
	return nil, false
}

// yamlValue names a value decoded from YAML, for messages: a scalar as written (a
// string quoted) with its kind, anything else by its kind.
func yamlValue(v any) string {
	switch v.(type) {
	case string:
		return fmt.Sprintf("%q (a string)", v)
	case int, int64, uint64, float64:
		return fmt.Sprintf("%v (a number)", v)
	}
	return yamlKind(v)
}

// parseImageOverrides reads image-overrides into cfg: a mapping of distribution name to
// image reference. An entry that is not a valid reference keeps the running image of
// its distribution; one for a distribution that does not exist keeps every running
// image that has no valid entry (it may be a typo of the one meant).
func parseImageOverrides(raw string, distributions map[string]string, cfg *OperatorConfig) {
	var doc any
	if err := yaml.Unmarshal([]byte(raw), &doc); err != nil {
		cfg.KeepAllImages = true
		cfg.Problems = append(cfg.Problems, fmt.Sprintf("key %s is not valid YAML (%v); running images are kept", KeyImageOverrides, err))
		return
	}
	entries, ok := doc.(map[string]any)
	if !ok {
		cfg.KeepAllImages = true
		cfg.Problems = append(cfg.Problems, fmt.Sprintf("key %s must be a mapping of distribution name to image, not %s; running images are kept", KeyImageOverrides, yamlKind(doc)))
		return
	}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		if _, known := distributions[name]; !known {
			cfg.KeepAllImages = true
			cfg.Problems = append(cfg.Problems, fmt.Sprintf("key %s: %q is not a distribution (overrides replace the image of one of: %s); running images without a valid entry are kept",
				KeyImageOverrides, name, strings.Join(slices.Sorted(maps.Keys(distributions)), ", ")))
			continue
		}
		s, isString := entries[name].(string)
		image := strings.TrimSpace(s)
		switch {
		case !isString:
			cfg.Problems = append(cfg.Problems, fmt.Sprintf("key %s: the entry for distribution %q must be an image reference, not %s; its running image is kept", KeyImageOverrides, name, yamlKind(entries[name])))
		case !ValidImageReference(image):
			cfg.Problems = append(cfg.Problems, fmt.Sprintf("key %s: %q for distribution %q is not a valid image reference; its running image is kept", KeyImageOverrides, image, name))
		default:
			if cfg.ImageOverrides == nil {
				cfg.ImageOverrides = map[string]string{}
			}
			cfg.ImageOverrides[name] = image
			continue
		}
		if cfg.KeepImages == nil {
			cfg.KeepImages = map[string]bool{}
		}
		cfg.KeepImages[name] = true
	}
}

// yamlKind names the kind of a value decoded from YAML, for messages.
func yamlKind(v any) string {
	switch v.(type) {
	case nil:
		return "empty"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case float64, int64, uint64, int:
		return "a number"
	case []any:
		return "a list"
	case map[string]any, map[any]any:
		return "a mapping"
	default:
		return fmt.Sprintf("%T", v)
	}
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

// ValidImageReference tells whether s is an image reference as image-overrides takes one.
func ValidImageReference(s string) bool {
	return len(s) <= 4096 && imageReferenceRE.MatchString(s)
}

// joinAnd joins words as a sentence lists them: "a", "a and b", "a, b and c".
func joinAnd(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}

package configgen

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// Fits reports what in a config the user wrote (overrideConfig, v1alpha1 userConfig)
// server version v lacks and stops on, so that the config is not rolled onto a server
// that would refuse it at start: an API it does not have (in apis or providers: "API
// 'safety' does not exist"), or a provider type it does not have. Unlike Validate it
// is not strict about keys: the server ignores the keys it does not read (Ignored
// lists those an earlier version read), and the file is the user's.
func Fits(configYAML []byte, v Version) error {
	if ok, why := v.supported(); !ok {
		return fmt.Errorf("%s", why)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(configYAML, &cfg); err != nil {
		return fmt.Errorf("the config does not parse: %w", err)
	}
	if cfg == nil {
		return fmt.Errorf("the config is empty")
	}
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	apis, _ := cfg["apis"].([]any)
	for _, a := range apis {
		if s, ok := a.(string); ok && !hasAPI(v, s) {
			bad("apis lists %s, which server %s does not have%s", s, v, renameHint(s, v))
		}
	}
	prov, _ := cfg["providers"].(map[string]any)
	for _, api := range sortedKeys(prov) {
		if !hasAPI(v, api) {
			bad("providers.%s: server %s has no %s API%s", api, v, api, renameHint(api, v))
		}
	}
	unknown, _ := checkRegistry(cfg, v)
	for _, u := range unknown {
		if hasAPI(v, u.api) {
			bad("providers.%s[%d]: server %s has no provider type %s", u.api, u.index, v, u.ptype)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// ServerTLS returns the certificate and key files a config tells the server to serve
// HTTPS with (server.tls_certfile and tls_keyfile); empty when it names none.
func ServerTLS(configYAML []byte) (certFile, keyFile string, err error) {
	var cfg struct {
		Server struct {
			CertFile any `json:"tls_certfile"`
			KeyFile  any `json:"tls_keyfile"`
		} `json:"server"`
	}
	if err := yaml.Unmarshal(configYAML, &cfg); err != nil {
		return "", "", fmt.Errorf("the config does not parse: %w", err)
	}
	certFile, _ = cfg.Server.CertFile.(string)
	keyFile, _ = cfg.Server.KeyFile.(string)
	return strings.TrimSpace(certFile), strings.TrimSpace(keyFile), nil
}

// Preflight reports what in a config the user wrote server version v would refuse at
// start-up, as far as the file alone tells: what Fits finds (an API or provider type
// the version lacks), a provider whose API dependency the config does not provide
// ("required dependency ... is not available"), and a provider config without a field
// the version requires. It does not look at ${env.X} references: the image may set
// variables the controller does not know.
func Preflight(configYAML []byte, v Version) error {
	if err := Fits(configYAML, v); err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(configYAML, &cfg); err != nil {
		return fmt.Errorf("the config does not parse: %w", err)
	}
	errs := checkTopLevel(cfg, v)
	_, deps := checkRegistry(cfg, v)
	for _, d := range deps {
		errs = append(errs, d.String())
	}
	for _, p := range checkRequiredAll(cfg, v) {
		errs = append(errs, p.String())
	}
	for _, p := range checkToolGroups(cfg, v) {
		errs = append(errs, fmt.Sprintf("%s at server %s", p, v))
	}
	for _, why := range []string{checkAPIsShape(cfg), checkDefaultShield(cfg, v)} {
		if why != "" {
			errs = append(errs, why)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

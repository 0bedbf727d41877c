package revision

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// CA bundle: the certificates of spec.networking.tls.caBundle and of the namespace's
// odh-trusted-ca-bundle, gathered into one managed ConfigMap and mounted into the server pod
// (its key, mount path and file are CABundleKey, CABundleMountPath and CABundleFile).
const (
	// ODHTrustedCABundle is the ConfigMap in the CR's namespace whose certificates are
	// added when it exists (OpenShift AI injects it).
	ODHTrustedCABundle = "odh-trusted-ca-bundle"

	// maxCABundleBytes caps the summed length of the source values read (every key taken,
	// whether or not it holds certificates), across all sources.
	maxCABundleBytes = 10 * 1024 * 1024
	// maxCABundleCerts caps the number of distinct certificates in the bundle.
	maxCABundleCerts = 1000
	// MaxBundleBytes is the most the managed ConfigMap can hold under its one key: the
	// API server limits a ConfigMap's keys and values to 1 MiB in total.
	MaxBundleBytes = 1024*1024 - len(CABundleKey)

	maxCAKeyLength = 253
)

var caKeyPattern = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9\-_.]*[a-zA-Z0-9])?$`)

// ValidateCAKeys checks the keys listed in spec.networking.tls.caBundle.configMapKeys,
// in order, and reports the first bad one. The CRD enforces the same rules at admission;
// this guards objects stored before it did.
func ValidateCAKeys(keys []string) error {
	for _, k := range keys {
		switch {
		case k == "":
			return errors.New("a CA bundle ConfigMap key is empty")
		case len(k) > maxCAKeyLength:
			return fmt.Errorf("CA bundle ConfigMap key '%s' is too long (at most %d characters)", k, maxCAKeyLength)
		case strings.Contains(k, "..") || strings.Contains(k, "/"):
			return fmt.Errorf("CA bundle ConfigMap key '%s' contains invalid path characters ('..' or '/')", k)
		case !caKeyPattern.MatchString(k):
			return fmt.Errorf("CA bundle ConfigMap key '%s' contains invalid characters: only alphanumerics, hyphens, underscores and dots are allowed, and it must start and end with an alphanumeric", k)
		}
	}
	return nil
}

// CASource is one ConfigMap's data to take certificates from.
type CASource struct {
	Namespace, Name string
	Data            map[string]string
	// Keys are the keys to read, in order; each must be in Data. nil means every key of
	// Data in sorted order (an empty, non-nil slice reads nothing).
	Keys []string
	// Optional marks the auto-detected ODH bundle: a key that is missing, does not parse
	// or holds no certificate is skipped with a warning, and a source yielding no
	// certificate is fine.
	Optional bool
}

// caBundle accumulates certificates across sources.
type caBundle struct {
	blocks [][]byte
	seen   map[string]bool
	bytes  int
}

// BuildCABundle concatenates the valid certificates of the sources, in order (keys sorted
// when Keys is nil), keeping the first copy of identical certificates. The bundle is the
// PEM blocks (re-encoded without headers) joined with "\n", ending with one newline, or
// "" when there is none; the same input always gives the same bytes. warnings are the
// keys of Optional sources that were skipped, and why. err is a problem for the user:
// a bad key of a non-optional source, a limit exceeded, or no certificate at all while a
// non-optional source is given. Keys are not validated here; see ValidateCAKeys.
func BuildCABundle(sources []CASource) (bundle string, certs int, warnings []string, err error) {
	b := &caBundle{seen: map[string]bool{}}
	var explicit []string
	for _, src := range sources {
		keys := src.Keys
		if keys == nil {
			keys = slices.Sorted(maps.Keys(src.Data))
		}
		if !src.Optional {
			explicit = append(explicit, fmt.Sprintf("%s/%s (%s)", src.Namespace, src.Name, describeKeys(keys)))
		}
		for _, k := range keys {
			data, ok := src.Data[k]
			if !ok {
				keyErr := fmt.Errorf("CA bundle ConfigMap %s/%s has no key '%s'", src.Namespace, src.Name, k)
				if src.Optional {
					warnings = append(warnings, keyErr.Error())
					continue
				}
				return "", 0, warnings, keyErr
			}
			b.bytes += len(data)
			if b.bytes > maxCABundleBytes {
				return "", 0, warnings, fmt.Errorf("the CA bundle sources hold more than the maximum of %d bytes", maxCABundleBytes)
			}
			found, keyErr := parseCertificates(data)
			if keyErr == nil && found == nil && strings.TrimSpace(data) != "" {
				keyErr = errors.New("it holds no PEM certificate")
			}
			if keyErr != nil {
				keyErr = fmt.Errorf("key '%s' of CA bundle ConfigMap %s/%s: %v", k, src.Namespace, src.Name, keyErr)
				if src.Optional {
					warnings = append(warnings, keyErr.Error())
					continue
				}
				return "", 0, warnings, keyErr
			}
			for _, der := range found {
				if b.seen[string(der)] {
					continue
				}
				if len(b.blocks) == maxCABundleCerts {
					return "", 0, warnings, fmt.Errorf("the CA bundle holds more than the maximum of %d certificates", maxCABundleCerts)
				}
				b.seen[string(der)] = true
				b.blocks = append(b.blocks, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
			}
		}
	}
	if len(b.blocks) == 0 {
		if len(explicit) > 0 {
			return "", 0, warnings, fmt.Errorf("no valid certificate found in CA bundle ConfigMap %s", strings.Join(explicit, ", "))
		}
		return "", 0, warnings, nil
	}
	parts := make([]string, len(b.blocks))
	for i, blk := range b.blocks {
		parts[i] = string(blk)
	}
	bundle = strings.Join(parts, "\n")
	if len(bundle) > MaxBundleBytes {
		return "", 0, warnings, fmt.Errorf("the CA bundle's %d certificates take %d bytes, more than the %d a ConfigMap can hold", len(b.blocks), len(bundle), MaxBundleBytes)
	}
	return bundle, len(b.blocks), warnings, nil
}

// parseCertificates returns the DER bytes of the CERTIFICATE blocks of data, in order.
// Other PEM blocks and text outside blocks are ignored; a CERTIFICATE block that is not
// an X.509 certificate is an error.
func parseCertificates(data string) ([][]byte, error) {
	var out [][]byte
	rest := []byte(data)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return out, nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d does not parse: %v", len(out)+1, err)
		}
		out = append(out, cert.Raw)
	}
}

// describeKeys names the keys read from a source, for messages.
func describeKeys(keys []string) string {
	if len(keys) == 0 {
		return "no keys read"
	}
	return "keys read: '" + strings.Join(keys, "', '") + "'"
}

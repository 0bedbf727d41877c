package configgen

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// EnvName is the environment variable that carries a Secret value into the
// server: LLSD_<ID>_<FIELD>, each part upper-cased with every run of
// characters other than A-Z and 0-9 turned into one "_", and a part starting
// with a digit prefixed by "_". The server accepts ${env.NAME} only for
// names of [A-Z0-9_]+, which these are.
func EnvName(id, field string) string {
	return "LLSD_" + envPart(id) + "_" + envPart(field)
}

func envPart(s string) string {
	var b strings.Builder
	run := false
	for _, r := range strings.ToUpper(s) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			run = false
			continue
		}
		if !run {
			b.WriteByte('_')
			run = true
		}
	}
	out := b.String()
	if out != "" && out[0] >= '0' && out[0] <= '9' {
		out = "_" + out
	}
	return out
}

// envSet collects the Secret-sourced variables of one config and refuses
// two fields that map to one name.
type envSet struct {
	byName map[string]envEntry
}

type envEntry struct {
	field string // the CR field it comes from
	ref   corev1.SecretKeySelector
}

func newEnvSet() *envSet { return &envSet{byName: map[string]envEntry{}} }

// add registers name for the CR field, and returns the ${env.NAME}
// reference to write in the config.
func (s *envSet) add(name, field, secret, key string) (string, error) {
	if prev, ok := s.byName[name]; ok {
		return "", invalid(field, "maps to the environment variable %s, as %s does: change an id or a field name so they differ", name, prev.field)
	}
	s.byName[name] = envEntry{field: field, ref: corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret},
		Key:                  key,
	}}
	return fmt.Sprintf("${env.%s}", name), nil
}

// vars returns the variables sorted by name, each from its Secret key.
func (s *envSet) vars() []corev1.EnvVar {
	names := make([]string, 0, len(s.byName))
	for n := range s.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]corev1.EnvVar, 0, len(names))
	for _, n := range names {
		ref := s.byName[n].ref
		out = append(out, corev1.EnvVar{Name: n, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &ref}})
	}
	return out
}

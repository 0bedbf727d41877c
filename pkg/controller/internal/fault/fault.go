// Package fault holds what a sync of a LlamaStackDistribution finds wrong: the
// problems only the user can fix (a condition and an Event, never a retry loop), and
// the API errors a sync treats apart (conflicts, a terminating namespace, the CR gone).
package fault

import (
	"errors"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// Problem is a problem only the user can fix. It becomes a condition and an Event,
// never a retry loop.
type Problem struct {
	// Reason is the condition's and the Event's reason.
	Reason string
	// Message says what is wrong and what to do.
	Message string
}

// Message is the messages of problems, joined.
func Message(problems []Problem) string {
	msgs := make([]string, 0, len(problems))
	for _, p := range problems {
		msgs = append(msgs, p.Message)
	}
	return strings.Join(msgs, "; ")
}

// IsReason tells whether reason is one of a Problem.
func IsReason(reason string) bool {
	switch reason {
	case v1alpha2.ReasonDistributionNotSupported, v1alpha2.ReasonDistributionNotPublished, v1alpha2.ReasonConfigMapNotFound, v1alpha2.ReasonConfigMapKeyMissing,
		v1alpha2.ReasonConfigMapNotAllowed, v1alpha2.ReasonCABundleInvalid, v1alpha2.ReasonTLSSecretNotFound, v1alpha2.ReasonTLSSecretInvalid, v1alpha2.ReasonResourceNotOwned,
		v1alpha2.ReasonResourceInvalid, v1alpha2.ReasonDeploymentFailed, v1alpha2.ReasonBaseConfigRequired,
		v1alpha2.ReasonConfigInvalid, v1alpha2.ReasonServerVersionNotSupported, v1alpha2.ReasonSpecInvalid:
		return true
	}
	return false
}

// WithoutConflicts returns err without the conflicts joined in it (nil when it held
// only conflicts): a conflict is a quiet retry, and must not hide a real error.
func WithoutConflicts(err error) error {
	if err == nil {
		return nil
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var rest []error
		for _, e := range joined.Unwrap() {
			if r := WithoutConflicts(e); r != nil {
				rest = append(rest, r)
			}
		}
		return errors.Join(rest...)
	}
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// NotFoundCR tells whether err, or one of the errors joined in it, says the CR of key
// is not found.
func NotFoundCR(err error, key cache.ObjectName) bool {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		return slices.ContainsFunc(joined.Unwrap(), func(e error) bool { return NotFoundCR(e, key) })
	}
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	d := status.Status().Details
	return d.Group == v1alpha2.SchemeGroupVersion.Group && d.Kind == "llamastackdistributions" && d.Name == key.Name
}

// NamespaceTerminating reports whether err, or one of the errors joined in it, is the
// API server refusing to create an object in a namespace that is being deleted.
func NamespaceTerminating(err error) bool {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		return slices.ContainsFunc(joined.Unwrap(), NamespaceTerminating)
	}
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

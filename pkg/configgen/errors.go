package configgen

import (
	"fmt"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// Error is why a config could not be generated: the CR field at fault (such
// as spec.providers.inference[1].endpoint), a condition reason from the
// v1alpha2 API, and a message for a user. It never holds a Secret value:
// the generator never sees one.
type Error struct {
	Field   string
	Reason  string
	Message string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func invalid(field, format string, a ...any) *Error {
	return &Error{Field: field, Reason: v1alpha2.ReasonConfigInvalid, Message: fmt.Sprintf(format, a...)}
}

package webhook

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
)

// DefaultMaxRequestBytes limits a ConversionReview's body. The API server sends a whole
// list in one review (every object not yet in the wanted version), so the limit is a
// list's, not an object's: 32 MiB is a few thousand LlamaStackDistributions.
const DefaultMaxRequestBytes = 32 << 20

// Converter converts one custom resource to another version of its group and kind.
//
// in has already been checked: its apiVersion is one of the handler's versions, other
// than toAPIVersion, and its kind is the handler's. Convert must not modify in. It
// returns the object in toAPIVersion ("group/version"), with the same kind, name,
// namespace and UID (the handler rejects anything else, as the API server would); only
// labels and annotations of its metadata may differ, everything else of metadata is
// restored by the API server from the original.
type Converter interface {
	Convert(in *unstructured.Unstructured, toAPIVersion string) (*unstructured.Unstructured, error)
}

// ConverterFunc adapts a function to a Converter.
type ConverterFunc func(in *unstructured.Unstructured, toAPIVersion string) (*unstructured.Unstructured, error)

// Convert calls f.
func (f ConverterFunc) Convert(in *unstructured.Unstructured, toAPIVersion string) (*unstructured.Unstructured, error) {
	return f(in, toAPIVersion)
}

// ConversionHandler answers apiextensions.k8s.io/v1 ConversionReviews for one group and
// kind (the CRD's spec.conversion.webhook with conversionReviewVersions: [v1]).
//
// A request that is not a ConversionReview it can answer (another method or
// Content-Type, a body too large, not JSON, another kind or apiVersion, no request or
// no uid) gets an HTTP error status and a plain text message: the API server reports
// it as the webhook's failure. A review it can read is answered with status 200 and a
// ConversionReview whose response carries the request's uid and either every object
// converted, in order, or result.status Failure with a message naming the object and
// the cause (an object of another group or kind, a desired version it does not serve,
// or the Converter's error): one object that fails fails the whole review, as the API
// server would fail it.
type ConversionHandler struct {
	gk        schema.GroupKind
	versions  sets.Set[string]
	converter Converter
	maxBytes  int64
}

// NewConversionHandler converts objects of group and kind between versions (e.g.
// "v1alpha1", "v1alpha2") with converter. maxRequestBytes limits the body; 0 means
// DefaultMaxRequestBytes.
func NewConversionHandler(gk schema.GroupKind, versions []string, converter Converter, maxRequestBytes int64) (*ConversionHandler, error) {
	if gk.Group == "" || gk.Kind == "" {
		return nil, fmt.Errorf("conversion handler: group and kind are required, got %q", gk)
	}
	if len(versions) < 2 {
		return nil, fmt.Errorf("conversion handler for %s: at least two versions are required, got %q", gk, versions)
	}
	if converter == nil {
		return nil, fmt.Errorf("conversion handler for %s: a Converter is required", gk)
	}
	if maxRequestBytes <= 0 {
		maxRequestBytes = DefaultMaxRequestBytes
	}
	return &ConversionHandler{gk: gk, versions: sets.New(versions...), converter: converter, maxBytes: maxRequestBytes}, nil
}

// requestError is a request the handler cannot answer with a ConversionReview.
type requestError struct {
	status int
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &requestError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// ServeHTTP implements http.Handler.
func (h *ConversionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	logger := klog.FromContext(r.Context())
	review, err := h.readReview(w, r)
	if err != nil {
		status := http.StatusBadRequest
		var re *requestError
		if errors.As(err, &re) {
			status = re.status
		}
		logger.V(2).Info("Rejected a conversion request", "status", status, "err", err)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(status)
		_, _ = fmt.Fprintln(w, err.Error())
		return
	}
	response := h.convert(review.Request)
	if response.Result.Status == metav1.StatusFailure {
		logger.V(2).Info("Conversion failed", "uid", response.UID, "desiredAPIVersion", review.Request.DesiredAPIVersion, "reason", response.Result.Message)
	} else {
		logger.V(4).Info("Converted", "uid", response.UID, "desiredAPIVersion", review.Request.DesiredAPIVersion, "objects", len(response.ConvertedObjects))
	}
	out, err := json.Marshal(&apiextensionsv1.ConversionReview{TypeMeta: review.TypeMeta, Response: response})
	if err != nil {
		// Only converted objects are marshalled here, and each was marshalled before.
		logger.Error(err, "Encoding a ConversionReview response")
		http.Error(w, "encoding the ConversionReview response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// readReview reads and checks the request up to its objects.
func (h *ConversionHandler) readReview(w http.ResponseWriter, r *http.Request) (*apiextensionsv1.ConversionReview, error) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return nil, &requestError{status: http.StatusMethodNotAllowed, msg: fmt.Sprintf("method %s not allowed: a ConversionReview is POSTed", r.Method)}
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, &requestError{status: http.StatusUnsupportedMediaType,
			msg: fmt.Sprintf("Content-Type %q not supported: a ConversionReview is sent as application/json", r.Header.Get("Content-Type"))}
	}
	if r.ContentLength > h.maxBytes {
		return nil, &requestError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body of %d bytes is larger than the limit of %d", r.ContentLength, h.maxBytes)}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &requestError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body is larger than the limit of %d bytes", h.maxBytes)}
		}
		return nil, badRequest("reading the request body: %v", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, badRequest("empty request body: expected a ConversionReview")
	}
	var review apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, badRequest("decoding the ConversionReview: %v", err)
	}
	wantGV := apiextensionsv1.SchemeGroupVersion.String()
	if review.Kind != "ConversionReview" || review.APIVersion != wantGV {
		return nil, badRequest("expected a ConversionReview of %s, got kind %q of apiVersion %q (set the CRD's conversionReviewVersions to [v1])",
			wantGV, review.Kind, review.APIVersion)
	}
	if review.Request == nil {
		return nil, badRequest("the ConversionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, badRequest("the ConversionReview's request has no uid")
	}
	return &review, nil
}

// convert answers one request; a failure fails the whole review.
func (h *ConversionHandler) convert(req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID}
	fail := func(format string, args ...any) *apiextensionsv1.ConversionResponse {
		resp.ConvertedObjects = nil
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf(format, args...)}
		return resp
	}
	to, err := schema.ParseGroupVersion(req.DesiredAPIVersion)
	if err != nil || to.Group != h.gk.Group || !h.versions.Has(to.Version) {
		return fail("desired apiVersion %q is not served by this webhook: expected %s", req.DesiredAPIVersion, h.servedAPIVersions())
	}
	resp.ConvertedObjects = make([]runtime.RawExtension, 0, len(req.Objects))
	for i, raw := range req.Objects {
		out, err := h.convertObject(raw.Raw, req.DesiredAPIVersion)
		if err != nil {
			return fail("object %d of %d: %v", i+1, len(req.Objects), err)
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	return resp
}

// convertObject checks one object, converts it and checks what the Converter made of it.
func (h *ConversionHandler) convertObject(raw []byte, toAPIVersion string) ([]byte, error) {
	if len(raw) == 0 {
		return nil, errors.New("empty object")
	}
	in, err := decodeObject(raw)
	if err != nil {
		return nil, err
	}
	gvk := in.GroupVersionKind()
	if gvk.GroupKind() != h.gk || !h.versions.Has(gvk.Version) {
		return nil, fmt.Errorf("%s %s of apiVersion %q is not a %s of %s", gvk.Kind, describe(in), in.GetAPIVersion(), h.gk.Kind, h.servedAPIVersions())
	}
	if in.GetAPIVersion() == toAPIVersion {
		// The API server sends none of these; were it to, the object is already converted.
		return raw, nil
	}
	out, err := safeConvert(h.converter, in, toAPIVersion)
	if err != nil {
		return nil, fmt.Errorf("converting %s %s from %s to %s: %w", h.gk.Kind, describe(in), in.GetAPIVersion(), toAPIVersion, err)
	}
	if err := checkConverted(in, out, toAPIVersion); err != nil {
		return nil, fmt.Errorf("converting %s %s from %s to %s: the converter %w", h.gk.Kind, describe(in), in.GetAPIVersion(), toAPIVersion, err)
	}
	data, err := out.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s in %s: %w", h.gk.Kind, describe(in), toAPIVersion, err)
	}
	return data, nil
}

// safeConvert calls the Converter, turning a panic into an error: a bug that one object
// triggers fails that review, with a message, not the connection.
func safeConvert(c Converter, in *unstructured.Unstructured, toAPIVersion string) (out *unstructured.Unstructured, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("the converter panicked: %v", r)
		}
	}()
	return c.Convert(in, toAPIVersion)
}

// decodeObject decodes an object, as the API server's own decoder would (integers stay
// int64), without echoing the object in its errors.
func decodeObject(raw []byte) (*unstructured.Unstructured, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if obj == nil {
		return nil, errors.New("decoding: not a JSON object")
	}
	for _, field := range []string{"apiVersion", "kind"} {
		if s, ok := obj[field].(string); !ok || s == "" {
			return nil, fmt.Errorf("decoding: no %s", field)
		}
	}
	if m, ok := obj["metadata"]; ok {
		if _, ok := m.(map[string]any); !ok {
			return nil, errors.New("decoding: metadata is not an object")
		}
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// checkConverted holds the Converter to what the API server checks of a response.
func checkConverted(in, out *unstructured.Unstructured, toAPIVersion string) error {
	switch {
	case out == nil:
		return errors.New("returned no object")
	case out.GetAPIVersion() != toAPIVersion:
		return fmt.Errorf("returned apiVersion %q", out.GetAPIVersion())
	case out.GetKind() != in.GetKind():
		return fmt.Errorf("changed the kind to %q", out.GetKind())
	case out.GetName() != in.GetName() || out.GetNamespace() != in.GetNamespace():
		return fmt.Errorf("changed the name to %s", describe(out))
	case out.GetUID() != in.GetUID():
		return fmt.Errorf("changed the uid to %q", out.GetUID())
	}
	return nil
}

func (h *ConversionHandler) servedAPIVersions() string {
	var out []string
	for _, v := range sets.List(h.versions) {
		out = append(out, h.gk.Group+"/"+v)
	}
	return strings.Join(out, " or ")
}

// describe names an object as namespace/name, or "(no name)".
func describe(u *unstructured.Unstructured) string {
	switch {
	case u.GetName() == "":
		return "(no name)"
	case u.GetNamespace() == "":
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

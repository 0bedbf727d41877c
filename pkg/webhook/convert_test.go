package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/klog/v2/ktesting"
)

var testGK = schema.GroupKind{Group: "llamastack.io", Kind: "LlamaStackDistribution"}

// stubConverter moves an object to the wanted version and records where it came from
// in an annotation and in spec.convertedFrom, so that a test sees the converter ran.
var stubConverter = ConverterFunc(func(in *unstructured.Unstructured, to string) (*unstructured.Unstructured, error) {
	out := in.DeepCopy()
	out.SetAPIVersion(to)
	ann := out.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann["test/converted-from"] = in.GetAPIVersion()
	out.SetAnnotations(ann)
	if err := unstructured.SetNestedField(out.Object, in.GetAPIVersion(), "spec", "convertedFrom"); err != nil {
		return nil, err
	}
	return out, nil
})

func newTestHandler(t testing.TB, c Converter, maxBytes int64) *ConversionHandler {
	t.Helper()
	h, err := NewConversionHandler(testGK, []string{"v1alpha1", "v1alpha2"}, c, maxBytes)
	require.NoError(t, err)
	return h
}

func llsdJSON(apiVersion, name string) string {
	return fmt.Sprintf(`{"apiVersion":%q,"kind":"LlamaStackDistribution","metadata":{"name":%q,"namespace":"ns","uid":"uid-%s"},"spec":{"replicas":2}}`,
		apiVersion, name, name)
}

func reviewJSON(uid, desired string, objects ...string) string {
	return fmt.Sprintf(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":%q,"desiredAPIVersion":%q,"objects":[%s]}}`,
		uid, desired, strings.Join(objects, ","))
}

// post sends body to h and returns the status, the response's Content-Type and body.
func post(t testing.TB, h http.Handler, contentType, body string) *httptest.ResponseRecorder {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/convert", strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func decodeResponse(t testing.TB, rec *httptest.ResponseRecorder) *apiextensionsv1.ConversionReview {
	t.Helper()
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var review apiextensionsv1.ConversionReview
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &review))
	require.Equal(t, "ConversionReview", review.Kind)
	require.Equal(t, "apiextensions.k8s.io/v1", review.APIVersion)
	require.Nil(t, review.Request, "the response does not echo the request")
	require.NotNil(t, review.Response)
	return &review
}

func TestConversionConvertsEveryObjectInOrder(t *testing.T) {
	h := newTestHandler(t, stubConverter, 0)
	rec := post(t, h, "application/json", reviewJSON("req-1", "llamastack.io/v1alpha2",
		llsdJSON("llamastack.io/v1alpha1", "a"),
		llsdJSON("llamastack.io/v1alpha2", "b"), // already there: passed through as is
		llsdJSON("llamastack.io/v1alpha1", "c")))
	review := decodeResponse(t, rec)
	require.Equal(t, "req-1", string(review.Response.UID))
	require.Equal(t, metav1.StatusSuccess, review.Response.Result.Status)
	require.Len(t, review.Response.ConvertedObjects, 3)
	for i, want := range []struct{ name, from string }{{"a", "llamastack.io/v1alpha1"}, {"b", ""}, {"c", "llamastack.io/v1alpha1"}} {
		obj := &unstructured.Unstructured{}
		require.NoError(t, obj.UnmarshalJSON(review.Response.ConvertedObjects[i].Raw))
		require.Equal(t, want.name, obj.GetName())
		require.Equal(t, "llamastack.io/v1alpha2", obj.GetAPIVersion())
		require.Equal(t, want.from, obj.GetAnnotations()["test/converted-from"])
		replicas, _, err := unstructured.NestedInt64(obj.Object, "spec", "replicas")
		require.NoError(t, err, "integers stay integers")
		require.Equal(t, int64(2), replicas)
	}
}

func TestConversionOfNoObjectsSucceeds(t *testing.T) {
	review := decodeResponse(t, post(t, newTestHandler(t, stubConverter, 0), "application/json; charset=utf-8",
		reviewJSON("req-2", "llamastack.io/v1alpha1")))
	require.Equal(t, "req-2", string(review.Response.UID))
	require.Equal(t, metav1.StatusSuccess, review.Response.Result.Status)
	require.Empty(t, review.Response.ConvertedObjects)
}

// TestConversionRejectsBadRequests covers what is not a ConversionReview the handler
// can answer: an HTTP error and a message that says what is wrong.
func TestConversionRejectsBadRequests(t *testing.T) {
	tests := map[string]struct {
		method, contentType, body string
		maxBytes                  int64
		wantStatus                int
		wantMessage               string
	}{
		"empty body":        {body: "", wantStatus: 400, wantMessage: "empty request body"},
		"blank body":        {body: " \n\t", wantStatus: 400, wantMessage: "empty request body"},
		"not JSON":          {body: "<xml/>", wantStatus: 400, wantMessage: "decoding the ConversionReview"},
		"truncated JSON":    {body: reviewJSON("u", "llamastack.io/v1alpha2")[:40], wantStatus: 400, wantMessage: "decoding the ConversionReview"},
		"trailing garbage":  {body: reviewJSON("u", "llamastack.io/v1alpha2") + "}", wantStatus: 400, wantMessage: "decoding the ConversionReview"},
		"a JSON array":      {body: "[]", wantStatus: 400, wantMessage: "decoding the ConversionReview"},
		"JSON null":         {body: "null", wantStatus: 400, wantMessage: `got kind "" of apiVersion ""`},
		"objects not array": {body: `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u","objects":{}}}`, wantStatus: 400, wantMessage: "decoding the ConversionReview"},
		"v1beta1 review": {
			body:       strings.Replace(reviewJSON("u", "llamastack.io/v1alpha2"), "apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1", 1),
			wantStatus: 400, wantMessage: `apiVersion "apiextensions.k8s.io/v1beta1" (set the CRD's conversionReviewVersions to [v1])`,
		},
		"another kind": {
			body:       strings.Replace(reviewJSON("u", "llamastack.io/v1alpha2"), `"ConversionReview"`, `"AdmissionReview"`, 1),
			wantStatus: 400, wantMessage: `got kind "AdmissionReview"`,
		},
		"kind in lower case": {
			body:       strings.Replace(reviewJSON("u", "llamastack.io/v1alpha2"), `"kind"`, `"KIND"`, 1),
			wantStatus: 400, wantMessage: `got kind ""`,
		},
		"no request": {
			body:       `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`,
			wantStatus: 400, wantMessage: "the ConversionReview has no request",
		},
		"no uid": {
			body:       reviewJSON("", "llamastack.io/v1alpha2", llsdJSON("llamastack.io/v1alpha1", "a")),
			wantStatus: 400, wantMessage: "the ConversionReview's request has no uid",
		},
		"body too large": {
			body:     reviewJSON("u", "llamastack.io/v1alpha2", llsdJSON("llamastack.io/v1alpha1", "a")),
			maxBytes: 64, wantStatus: 413, wantMessage: "larger than the limit of 64",
		},
		"wrong Content-Type": {
			contentType: "application/yaml", body: reviewJSON("u", "llamastack.io/v1alpha2"),
			wantStatus: 415, wantMessage: `Content-Type "application/yaml" not supported`,
		},
		"CBOR": {
			contentType: "application/cbor", body: "\xa0",
			wantStatus: 415, wantMessage: `Content-Type "application/cbor" not supported`,
		},
		"no Content-Type": {
			contentType: "-", body: reviewJSON("u", "llamastack.io/v1alpha2"),
			wantStatus: 415, wantMessage: `Content-Type "" not supported`,
		},
		"GET": {
			method: http.MethodGet, wantStatus: 405, wantMessage: "method GET not allowed",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newTestHandler(t, ConverterFunc(func(*unstructured.Unstructured, string) (*unstructured.Unstructured, error) {
				t.Fatal("the converter must not be called")
				return nil, nil
			}), tc.maxBytes)
			_, ctx := ktesting.NewTestContext(t)
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			req := httptest.NewRequestWithContext(ctx, method, "/convert", strings.NewReader(tc.body))
			switch tc.contentType {
			case "":
				req.Header.Set("Content-Type", "application/json")
			case "-":
			default:
				req.Header.Set("Content-Type", tc.contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			require.Equal(t, tc.wantStatus, rec.Code, rec.Body.String())
			require.Contains(t, rec.Body.String(), tc.wantMessage)
			require.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
		})
	}
}

// TestConversionBodyLimitWithoutContentLength: a chunked body is cut at the limit too.
func TestConversionBodyLimitWithoutContentLength(t *testing.T) {
	h := newTestHandler(t, stubConverter, 100)
	_, ctx := ktesting.NewTestContext(t)
	body := reviewJSON("u", "llamastack.io/v1alpha2", llsdJSON("llamastack.io/v1alpha1", "a"), llsdJSON("llamastack.io/v1alpha1", "b"))
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/convert", strings.NewReader(body))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	require.Contains(t, rec.Body.String(), "larger than the limit of 100 bytes")
}

// TestConversionFailures covers reviews the handler reads but cannot convert: status
// 200, the request's uid, result Failure with a message, no objects.
func TestConversionFailures(t *testing.T) {
	failing := ConverterFunc(func(*unstructured.Unstructured, string) (*unstructured.Unstructured, error) {
		return nil, errors.New("spec.x has no home in v1alpha2")
	})
	misbehaving := func(edit func(u *unstructured.Unstructured)) Converter {
		return ConverterFunc(func(in *unstructured.Unstructured, to string) (*unstructured.Unstructured, error) {
			out, err := stubConverter(in, to)
			if err == nil {
				edit(out)
			}
			return out, err
		})
	}
	v1 := func(name string) string { return llsdJSON("llamastack.io/v1alpha1", name) }
	tests := map[string]struct {
		converter   Converter
		desired     string
		objects     []string
		wantMessage string
	}{
		"unknown desired version": {
			desired: "llamastack.io/v1beta1", objects: []string{v1("a")},
			wantMessage: `desired apiVersion "llamastack.io/v1beta1" is not served by this webhook: expected llamastack.io/v1alpha1 or llamastack.io/v1alpha2`,
		},
		"desired version of another group": {
			desired: "apps/v1alpha2", objects: []string{v1("a")},
			wantMessage: `desired apiVersion "apps/v1alpha2" is not served`,
		},
		"no desired version": {
			desired: "", objects: []string{v1("a")}, wantMessage: `desired apiVersion "" is not served`,
		},
		"malformed desired version": {
			desired: "a/b/c", objects: []string{v1("a")}, wantMessage: `desired apiVersion "a/b/c" is not served`,
		},
		"object of another kind": {
			objects:     []string{v1("a"), `{"apiVersion":"llamastack.io/v1alpha1","kind":"Other","metadata":{"name":"o","namespace":"ns"}}`},
			wantMessage: `object 2 of 2: Other ns/o of apiVersion "llamastack.io/v1alpha1" is not a LlamaStackDistribution`,
		},
		"object of another group": {
			objects:     []string{`{"apiVersion":"apps/v1","kind":"LlamaStackDistribution","metadata":{"name":"d"}}`},
			wantMessage: `object 1 of 1: LlamaStackDistribution d of apiVersion "apps/v1" is not a LlamaStackDistribution of llamastack.io/v1alpha1 or llamastack.io/v1alpha2`,
		},
		"object of an unknown version": {
			objects:     []string{llsdJSON("llamastack.io/v2", "a")},
			wantMessage: `apiVersion "llamastack.io/v2" is not a LlamaStackDistribution`,
		},
		"object without kind":       {objects: []string{`{"apiVersion":"llamastack.io/v1alpha1"}`}, wantMessage: "object 1 of 1: decoding: no kind"},
		"object without apiVersion": {objects: []string{`{"kind":"LlamaStackDistribution"}`}, wantMessage: "object 1 of 1: decoding: no apiVersion"},
		"object kind not a string":  {objects: []string{`{"apiVersion":"llamastack.io/v1alpha1","kind":7}`}, wantMessage: "decoding: no kind"},
		"object not an object":      {objects: []string{`"a string"`}, wantMessage: "object 1 of 1: decoding:"},
		"null object":               {objects: []string{`null`}, wantMessage: "object 1 of 1: empty object"},
		"metadata not an object": {
			objects:     []string{`{"apiVersion":"llamastack.io/v1alpha1","kind":"LlamaStackDistribution","metadata":"x"}`},
			wantMessage: "metadata is not an object",
		},
		"converter error": {
			converter: failing, objects: []string{v1("a")},
			wantMessage: "object 1 of 1: converting LlamaStackDistribution ns/a from llamastack.io/v1alpha1 to llamastack.io/v1alpha2: spec.x has no home in v1alpha2",
		},
		"converter panics": {
			converter: ConverterFunc(func(in *unstructured.Unstructured, _ string) (*unstructured.Unstructured, error) {
				var m map[string]any
				m["spec"] = in.Object["spec"]
				return nil, nil
			}),
			objects:     []string{v1("a")},
			wantMessage: "from llamastack.io/v1alpha1 to llamastack.io/v1alpha2: the converter panicked: assignment to entry in nil map",
		},
		"converter returns nothing": {
			converter: ConverterFunc(func(*unstructured.Unstructured, string) (*unstructured.Unstructured, error) { return nil, nil }),
			objects:   []string{v1("a")}, wantMessage: "the converter returned no object",
		},
		"converter keeps the version": {
			converter: misbehaving(func(u *unstructured.Unstructured) { u.SetAPIVersion("llamastack.io/v1alpha1") }),
			objects:   []string{v1("a")}, wantMessage: `the converter returned apiVersion "llamastack.io/v1alpha1"`,
		},
		"converter renames": {
			converter: misbehaving(func(u *unstructured.Unstructured) { u.SetName("b") }),
			objects:   []string{v1("a")}, wantMessage: "the converter changed the name to ns/b",
		},
		"converter changes the uid": {
			converter: misbehaving(func(u *unstructured.Unstructured) { u.SetUID("other") }),
			objects:   []string{v1("a")}, wantMessage: `the converter changed the uid to "other"`,
		},
		"converter changes the kind": {
			converter: misbehaving(func(u *unstructured.Unstructured) { u.SetKind("Other") }),
			objects:   []string{v1("a")}, wantMessage: `the converter changed the kind to "Other"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := tc.converter
			if c == nil {
				c = stubConverter
			}
			desired := tc.desired
			if desired == "" && !strings.HasPrefix(name, "no desired") {
				desired = "llamastack.io/v1alpha2"
			}
			review := decodeResponse(t, post(t, newTestHandler(t, c, 0), "application/json", reviewJSON("uid-f", desired, tc.objects...)))
			require.Equal(t, "uid-f", string(review.Response.UID))
			require.Equal(t, metav1.StatusFailure, review.Response.Result.Status)
			require.Contains(t, review.Response.Result.Message, tc.wantMessage)
			require.Empty(t, review.Response.ConvertedObjects)
		})
	}
}

func TestNewConversionHandlerChecksItsArguments(t *testing.T) {
	_, err := NewConversionHandler(schema.GroupKind{Group: "llamastack.io"}, []string{"a", "b"}, stubConverter, 0)
	require.ErrorContains(t, err, "group and kind are required")
	_, err = NewConversionHandler(testGK, []string{"v1alpha1"}, stubConverter, 0)
	require.ErrorContains(t, err, "at least two versions")
	_, err = NewConversionHandler(testGK, []string{"v1alpha1", "v1alpha2"}, nil, 0)
	require.ErrorContains(t, err, "a Converter is required")
	h, err := NewConversionHandler(testGK, []string{"v1alpha1", "v1alpha2"}, stubConverter, 0)
	require.NoError(t, err)
	require.Equal(t, int64(DefaultMaxRequestBytes), h.maxBytes)
}

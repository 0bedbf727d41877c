package webhook

import (
	"net/http"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/json"
)

// FuzzConversionRequest sends arbitrary bodies to the handler. Whatever the body, the
// handler does not panic and answers either an HTTP error with a message, or a
// ConversionReview with the request's uid that is a Success with one object per
// request object, each in the desired version, or a Failure with a message and none.
func FuzzConversionRequest(f *testing.F) {
	v1 := llsdJSON("llamastack.io/v1alpha1", "a")
	v2 := llsdJSON("llamastack.io/v1alpha2", "b")
	for _, seed := range []string{
		"",
		"null",
		"{}",
		"[]",
		reviewJSON("u", "llamastack.io/v1alpha2"),
		reviewJSON("u", "llamastack.io/v1alpha2", v1),
		reviewJSON("u", "llamastack.io/v1alpha1", v1, v2),
		reviewJSON("u", "llamastack.io/v9", v1),
		reviewJSON("", "llamastack.io/v1alpha2", v1),
		reviewJSON("u", "llamastack.io/v1alpha2", `{"apiVersion":"apps/v1","kind":"Deployment"}`),
		reviewJSON("u", "llamastack.io/v1alpha2", `null`, `1`, `"x"`, `[]`),
		reviewJSON("u", "llamastack.io/v1alpha2", `{"apiVersion":"llamastack.io/v1alpha1","kind":"LlamaStackDistribution","metadata":[]}`),
		`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":null}`,
		`{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"ConversionReview","request":{"uid":"u"}}`,
		strings.Repeat("[", 10000),
	} {
		f.Add(seed)
	}
	h := newTestHandler(f, stubConverter, 1<<20)
	f.Fuzz(func(t *testing.T, body string) {
		rec := post(t, h, "application/json", body)
		if rec.Code != http.StatusOK {
			if rec.Code < 400 || rec.Code > 499 || strings.TrimSpace(rec.Body.String()) == "" {
				t.Fatalf("status %d with body %q: want a client error with a message", rec.Code, rec.Body.String())
			}
			return
		}
		var in apiextensionsv1.ConversionReview
		if err := json.Unmarshal([]byte(body), &in); err != nil || in.Request == nil {
			t.Fatalf("answered 200 to a request that does not decode (%v)", err)
		}
		var out apiextensionsv1.ConversionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("the response does not decode: %v", err)
		}
		resp := out.Response
		switch {
		case resp == nil:
			t.Fatal("no response")
		case resp.UID != in.Request.UID:
			t.Fatalf("response uid %q, request uid %q", resp.UID, in.Request.UID)
		case resp.Result.Status == metav1.StatusFailure:
			if resp.Result.Message == "" || len(resp.ConvertedObjects) != 0 {
				t.Fatalf("a failure needs a message and no objects: %+v", resp)
			}
		case resp.Result.Status == metav1.StatusSuccess:
			if len(resp.ConvertedObjects) != len(in.Request.Objects) {
				t.Fatalf("%d objects converted of %d", len(resp.ConvertedObjects), len(in.Request.Objects))
			}
			for i, raw := range resp.ConvertedObjects {
				obj := &unstructured.Unstructured{}
				if err := obj.UnmarshalJSON(raw.Raw); err != nil {
					t.Fatalf("object %d does not decode: %v", i, err)
				}
				if obj.GetAPIVersion() != in.Request.DesiredAPIVersion {
					t.Fatalf("object %d is in %q, want %q", i, obj.GetAPIVersion(), in.Request.DesiredAPIVersion)
				}
			}
		default:
			t.Fatalf("result status %q", resp.Result.Status)
		}
	})
}

package conversion

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/webhook"
)

// examples reads every LlamaStackDistribution in the YAML files of dir.
func examples(t *testing.T, dir string) map[string]*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	out := map[string]*unstructured.Unstructured{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, doc := range strings.Split(string(raw), "\n---") {
			var obj map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(doc), &obj), f)
			if obj == nil || obj["kind"] != "LlamaStackDistribution" {
				continue
			}
			u := &unstructured.Unstructured{Object: obj}
			u.SetUID(types.UID(filepath.Base(f)))
			out[filepath.Base(f)+"#"+string(rune('0'+i))] = u
		}
	}
	require.NotEmpty(t, out, "no LlamaStackDistribution in %s", dir)
	return out
}

// review sends objs through the webhook's real handler, converted to version.
func review(t *testing.T, version string, objs ...*unstructured.Unstructured) *apiextensionsv1.ConversionResponse {
	t.Helper()
	h, err := webhook.NewConversionHandler(schema.GroupKind{Group: "llamastack.io", Kind: "LlamaStackDistribution"}, Versions, webhook.ConverterFunc(Convert), 0)
	require.NoError(t, err)
	req := &apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: "review-1", DesiredAPIVersion: "llamastack.io/" + version},
	}
	for _, o := range objs {
		raw, err := json.Marshal(o.Object)
		require.NoError(t, err)
		req.Request.Objects = append(req.Request.Objects, runtime.RawExtension{Raw: raw})
	}
	body, err := json.Marshal(req)
	require.NoError(t, err)
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, webhook.ConvertPath, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var resp apiextensionsv1.ConversionReview
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &resp))
	require.NotNil(t, resp.Response)
	assert.Equal(t, types.UID("review-1"), resp.Response.UID)
	return resp.Response
}

// typedSpec decodes the spec of a v1alpha1 or v1alpha2 object into its type.
func typedSpec(t *testing.T, u *unstructured.Unstructured) any {
	t.Helper()
	switch u.GetAPIVersion() {
	case v1alpha1.SchemeGroupVersion.String():
		var l v1alpha1.LlamaStackDistribution
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &l))
		return l.Spec
	default:
		var l v1alpha2.LlamaStackDistribution
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &l))
		return l.Spec
	}
}

func decode(t *testing.T, raw runtime.RawExtension) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, json.Unmarshal(raw.Raw, &u.Object))
	return u
}

// TestExamplesRoundTripThroughTheWebhook: every example, in each version, goes to the
// other version and back through the webhook's handler and comes back as it was.
func TestExamplesRoundTripThroughTheWebhook(t *testing.T) {
	for _, tc := range []struct{ dir, from, to string }{
		{"../../artifacts/examples", "v1alpha1", "v1alpha2"},
		{"../../artifacts/examples/v1alpha2", "v1alpha2", "v1alpha1"},
	} {
		for name, obj := range examples(t, tc.dir) {
			t.Run(tc.from+"/"+name, func(t *testing.T) {
				if tc.from == "v1alpha1" {
					// The API server fills in v1alpha1's schema defaults before the
					// webhook sees a v1alpha1 object.
					if _, ok, _ := unstructured.NestedString(obj.Object, "spec", "server", "containerSpec", "name"); !ok {
						require.NoError(t, unstructured.SetNestedField(obj.Object, v1alpha1.DefaultContainerName, "spec", "server", "containerSpec", "name"))
					}
				}
				there := review(t, tc.to, obj)
				require.Equal(t, metav1.StatusSuccess, there.Result.Status, there.Result.Message)
				require.Len(t, there.ConvertedObjects, 1)
				converted := decode(t, there.ConvertedObjects[0])
				assert.Equal(t, "llamastack.io/"+tc.to, converted.GetAPIVersion())
				assert.Equal(t, obj.GetName(), converted.GetName())

				back := review(t, tc.from, converted)
				require.Equal(t, metav1.StatusSuccess, back.Result.Status, back.Result.Message)
				got := decode(t, back.ConvertedObjects[0])
				// Compared in their typed form: encoding a typed object writes empty
				// structs (containerSpec: {resources: {}}) that mean what their absence does.
				assert.Equal(t, typedSpec(t, obj), typedSpec(t, got), "spec after the round trip")
				assert.Empty(t, got.GetAnnotations()["llamastack.io/conversion-data"], "nothing left to keep after the trip back")
			})
		}
	}
}

// TestConvertRefusesWhatItCannotHold: a field the types do not have is an error (it
// would be lost), as are versions the converter does not know.
func TestConvertRefusesWhatItCannotHold(t *testing.T) {
	obj := examples(t, "../../artifacts/examples")["minimal.yaml#0"]
	require.NotNil(t, obj)

	unknown := obj.DeepCopy()
	require.NoError(t, unstructured.SetNestedField(unknown.Object, "x", "spec", "server", "notAField"))
	_, err := Convert(unknown, "llamastack.io/v1alpha2")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "notAField")

	other := obj.DeepCopy()
	other.SetAPIVersion("llamastack.io/v1beta9")
	_, err = Convert(other, "llamastack.io/v1alpha2")
	assert.ErrorContains(t, err, `cannot convert from "llamastack.io/v1beta9"`)

	_, err = Convert(obj, "llamastack.io/v1beta9")
	assert.ErrorContains(t, err, `cannot convert to "llamastack.io/v1beta9"`)

	// Through the handler: a Failure with the message, not a crash.
	resp := review(t, "v1alpha2", unknown)
	assert.Equal(t, metav1.StatusFailure, resp.Result.Status)
	assert.Contains(t, resp.Result.Message, "notAField")
}

// TestSameVersionIsACopy: no conversion, no change.
func TestSameVersionIsACopy(t *testing.T) {
	obj := examples(t, "../../artifacts/examples")["minimal.yaml#0"]
	out, err := Convert(obj, obj.GetAPIVersion())
	require.NoError(t, err)
	assert.Equal(t, obj.Object, out.Object)
	out.SetName("changed")
	assert.NotEqual(t, "changed", obj.GetName())
}

// TestScaledToZeroReadsAsZeroInV1alpha1: a CR scaled to zero says replicas: 0 in
// v1alpha1, so that a v1alpha1 client's write of what it read (which the API server
// defaults to 1 where replicas is missing) keeps it at zero; an unset one stays unset.
func TestScaledToZeroReadsAsZeroInV1alpha1(t *testing.T) {
	for _, replicas := range []*int32{ptr.To[int32](0), ptr.To[int32](3), nil} {
		hub := &v1alpha2.LlamaStackDistribution{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha2.SchemeGroupVersion.String(), Kind: "LlamaStackDistribution"},
			ObjectMeta: metav1.ObjectMeta{Name: "llsd", Namespace: "ns"},
			Spec: v1alpha2.LlamaStackDistributionSpec{
				Distribution: v1alpha2.DistributionSpec{Name: "starter"},
				Workload:     v1alpha2.WorkloadSpec{Replicas: replicas},
			},
		}
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(hub)
		require.NoError(t, err)
		spoke, err := Convert(&unstructured.Unstructured{Object: content}, v1alpha1.SchemeGroupVersion.String())
		require.NoError(t, err)
		got, found, err := unstructured.NestedInt64(spoke.Object, "spec", "replicas")
		require.NoError(t, err)
		if replicas == nil {
			assert.False(t, found, "unset stays unset")
			continue
		}
		assert.True(t, found, "replicas %d is written", *replicas)
		assert.Equal(t, int64(*replicas), got)
	}
}

package children

import (
	"fmt"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha1"
	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
	"github.com/llamastack/llama-stack-controller/pkg/configgen"
)

// hub is l as the controller reads it: converted to v1alpha2.
func hub(l *v1alpha1.LlamaStackDistribution) *v1alpha2.LlamaStackDistribution {
	var out v1alpha2.LlamaStackDistribution
	if err := l.ConvertTo(&out); err != nil {
		panic(fmt.Sprintf("converting %s/%s to v1alpha2: %v", l.Namespace, l.Name, err))
	}
	return &out
}

// starterVersion is the server version of the starter distribution's pinned image.
func starterVersion() string {
	for _, d := range configgen.Distributions() {
		if d.Name == "starter" {
			return d.ServerVersion
		}
	}
	return ""
}

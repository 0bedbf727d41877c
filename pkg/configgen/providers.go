package configgen

// The config fields that spec.providers[].endpoint and .apiKey are written
// to, per API, provider type and server version, read from each provider's
// config class (providers/remote/<api>/<name>/config.py; the remote inference
// providers inherit api_key from RemoteInferenceProviderConfig). A type not
// listed here, or listed without the field, gets an error telling the user
// to set the field by its name through settings or secretRefs: a guessed
// name would be ignored by the server without a word. A type the server
// version does not have (registry.go: remote::tgi until 0.6, remote::
// elasticsearch from 0.5, remote::passthrough safety and
// remote::llama-cpp-server from 0.6, remote::infinispan from 0.7) has no
// field at that version.

type fieldNames struct {
	// endpointOld is the endpoint field before 0.4, endpoint from 0.4;
	// empty: the type has no endpoint field then.
	endpointOld, endpoint string
	// key is the field an API key goes to; keyFrom is the first minor
	// version that has it (0: every supported version).
	key     string
	keyFrom int
}

var providerFields = map[string]map[string]fieldNames{
	"inference": {
		"remote::anthropic":           {key: "api_key"},
		"remote::azure":               {endpointOld: "api_base", endpoint: "base_url", key: "api_key"},
		"remote::bedrock":             {key: "api_key", keyFrom: 4},
		"remote::cerebras":            {endpointOld: "base_url", endpoint: "base_url", key: "api_key"},
		"remote::databricks":          {endpointOld: "url", endpoint: "base_url", key: "api_token"},
		"remote::deepseek":            {endpoint: "base_url", key: "api_key"},
		"remote::fireworks":           {endpointOld: "url", endpoint: "base_url", key: "api_key"},
		"remote::gemini":              {key: "api_key"},
		"remote::groq":                {endpointOld: "url", endpoint: "base_url", key: "api_key"},
		"remote::llama-cpp-server":    {endpoint: "base_url", key: "api_key"},
		"remote::llama-openai-compat": {endpointOld: "openai_compat_api_base", endpoint: "base_url", key: "api_key"},
		"remote::meta":                {endpoint: "base_url", key: "api_key"},
		"remote::mistral":             {endpoint: "base_url", key: "api_key"},
		"remote::nvidia":              {endpointOld: "url", endpoint: "base_url", key: "api_key"},
		"remote::ollama":              {endpointOld: "url", endpoint: "base_url"},
		"remote::openai":              {endpointOld: "base_url", endpoint: "base_url", key: "api_key"},
		"remote::passthrough":         {endpointOld: "url", endpoint: "base_url", key: "api_key"},
		"remote::runpod":              {endpointOld: "url", endpoint: "base_url", key: "api_token"},
		"remote::sambanova":           {endpointOld: "url", endpoint: "base_url", key: "api_key"},
		"remote::tgi":                 {endpointOld: "url", endpoint: "base_url"},
		"remote::together":            {endpointOld: "url", endpoint: "base_url", key: "api_key"},
		"remote::vllm":                {endpointOld: "url", endpoint: "base_url", key: "api_token"},
		"remote::watsonx":             {endpointOld: "url", endpoint: "base_url", key: "api_key"},
	},
	"safety": {
		"remote::nvidia":      {endpointOld: "guardrails_service_url", endpoint: "guardrails_service_url"},
		"remote::passthrough": {endpoint: "base_url", key: "api_key"},
		"remote::sambanova":   {endpointOld: "url", endpoint: "url", key: "api_key"},
	},
	"vector_io": {
		"remote::chromadb":      {endpointOld: "url", endpoint: "url"},
		"remote::elasticsearch": {endpointOld: "elasticsearch_url", endpoint: "elasticsearch_url", key: "elasticsearch_api_key"},
		"remote::infinispan":    {endpointOld: "url", endpoint: "url"},
		"remote::milvus":        {endpointOld: "uri", endpoint: "uri", key: "token"},
		"remote::neo4j":         {endpoint: "uri"},
		"remote::qdrant":        {endpointOld: "url", endpoint: "url", key: "api_key"},
		"remote::weaviate":      {endpointOld: "weaviate_cluster_url", endpoint: "weaviate_cluster_url", key: "weaviate_api_key"},
	},
	"tool_runtime": {
		"remote::bing-search":   {key: "api_key"},
		"remote::brave-search":  {key: "api_key"},
		"remote::tavily-search": {key: "api_key"},
		"remote::wolfram-alpha": {key: "api_key"},
	},
	"files": {
		"remote::openai": {key: "api_key", keyFrom: 4},
	},
	"file_processors": {
		"remote::docling-serve":    {endpoint: "base_url", key: "api_key"},
		"remote::unstructured-api": {key: "api_key"},
	},
}

// endpointField is the field endpoint goes to, or "" when none is known.
func endpointField(api, ptype string, v Version) string {
	if _, ok := lookupProvider(api, ptype, v); !ok {
		return "" // no such type at v (registry.go)
	}
	f := providerFields[api][ptype]
	if v.atLeast(4) {
		return f.endpoint
	}
	return f.endpointOld
}

// keyField is the field apiKey goes to, or "" when none is known.
func keyField(api, ptype string, v Version) string {
	if _, ok := lookupProvider(api, ptype, v); !ok {
		return ""
	}
	f := providerFields[api][ptype]
	if f.keyFrom > 0 && !v.atLeast(f.keyFrom) {
		return ""
	}
	return f.key
}

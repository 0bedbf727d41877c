package revision

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Content hashes of ConfigMap data: how a ConfigMap's content is compared without
// keeping it (the ConfigMap cache keeps only the hash).

// CacheHashAnnotation carries, on the ConfigMaps that the controller's ConfigMap cache
// returns, the content hash of the data the cache dropped. It never reaches the API server.
const CacheHashAnnotation = "internal.llama-stack-controller/content-hash"

// ConfigMapHash is the content hash of a ConfigMap's data and binaryData: the same for
// the same content whatever the metadata, so only a content change rolls the pods.
func ConfigMapHash(cm *corev1.ConfigMap) string {
	if h, ok := cm.Annotations[CacheHashAnnotation]; ok {
		return h
	}
	return HashData(cm.Data, cm.BinaryData)
}

// HashData is the content hash of data and binaryData, in hex: HashSum's digest.
func HashData(data map[string]string, binary map[string][]byte) string {
	sum := HashSum(data, binary)
	return hex.EncodeToString(sum[:])
}

// HashSum is the SHA-256 digest of data and binaryData, keys and values, in key order.
func HashSum(data map[string]string, binary map[string][]byte) [sha256.Size]byte {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		fmt.Fprintf(h, "d%d:%s%d:%s", len(k), k, len(data[k]), data[k])
	}
	for _, k := range slices.Sorted(maps.Keys(binary)) {
		fmt.Fprintf(h, "b%d:%s%d:", len(k), k, len(binary[k]))
		h.Write(binary[k])
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

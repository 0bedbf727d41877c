package controller

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

// configMapHash is the content hash of a ConfigMap's data and binaryData: the same for
// the same content whatever the metadata, so only a content change rolls the pods.
func configMapHash(cm *corev1.ConfigMap) string {
	if h, ok := cm.Annotations[cacheHashAnnotation]; ok {
		return h
	}
	return hashData(cm.Data, cm.BinaryData)
}

// hashData is the content hash of data and binaryData, in hex: hashSum's digest.
func hashData(data map[string]string, binary map[string][]byte) string {
	sum := hashSum(data, binary)
	return hex.EncodeToString(sum[:])
}

// hashSum is the SHA-256 digest of data and binaryData, keys and values, in key order.
func hashSum(data map[string]string, binary map[string][]byte) [sha256.Size]byte {
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

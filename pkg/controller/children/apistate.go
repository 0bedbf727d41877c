package children

// APIState is what the controller knows of an optional kind's API (a kind the cluster
// may not serve, such as Gateway API's HTTPRoute).
type APIState int

const (
	// APIUnknown: not known yet (the CRD's informer or the kind's has not synced).
	APIUnknown APIState = iota
	// APIAbsent: the cluster does not serve it.
	APIAbsent
	// APIServed: served, and the kind's informer has synced.
	APIServed
)

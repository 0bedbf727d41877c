package configgen

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a llama-stack server version, major.minor.patch.
type Version struct {
	Major, Minor, Patch int
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Oldest and newest server versions whose config.yaml shape this package
// knows. 0.2.x kept storage inside each provider and resources at the top
// level: reported, never guessed. From 0.8 the server is OGX (the same
// project renamed): its shapes are read at its tags to 1.3; 1.4 and 1.5 are
// taken to be 1.3 (inferred from their release notes: 1.5's breaking changes,
// an authoritative apis list and conversations and prompts served only with
// responses or when listed, change nothing the controller writes, as it always
// writes apis). 2.0 retired the tool_runtime API, on which the responses
// provider depended up to 1.x; no source of 2.0's config could be read, so it
// is reported, not guessed.
var (
	oldestSupported = Version{0, 3, 0}
	newestSupported = Version{1, 5, 99}
)

// knownShapes names the supported range for messages.
const knownShapes = "0.3 to 0.7, and OGX 0.8 to 1.5"

// ParseVersion reads "0.7.1" (a leading "v" is allowed). A pre-release or
// build suffix is not: an image tag such as 0.7.1rc2 is a different server.
func ParseVersion(s string) (Version, error) {
	t := strings.TrimPrefix(s, "v")
	parts := strings.Split(t, ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("server version %q is not major.minor.patch", s)
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 || p == "" || (len(p) > 1 && p[0] == '0') {
			return Version{}, fmt.Errorf("server version %q is not major.minor.patch", s)
		}
		n[i] = x
	}
	return Version{n[0], n[1], n[2]}, nil
}

func (v Version) less(o Version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor < o.Minor
	}
	return v.Patch < o.Patch
}

// atLeast reports whether v is 0.<minor> or newer.
func (v Version) atLeast(minor int) bool { return !v.less(Version{0, minor, 0}) }

// from reports whether v is major.minor or newer.
func (v Version) from(major, minor int) bool { return !v.less(Version{major, minor, 0}) }

// AtLeast reports whether v is major.minor or newer.
func (v Version) AtLeast(major, minor int) bool { return v.from(major, minor) }

// line numbers the version's minor release: 100*major + minor (0.7 is 7,
// 1.3 is 103), the unit of the provider registry's ranges.
func (v Version) line() int { return v.Major*100 + v.Minor }

// OGX reports whether v is of the OGX line: the server renamed from 0.8.0 (package
// ogx, OGX_* variables, data under ~/.ogx).
func (v Version) OGX() bool { return v.from(0, 8) }

// Known reports whether the package knows the config shape of v.
func Known(v Version) bool {
	ok, _ := v.supported()
	return ok
}

// supported reports whether this package knows the config shape of v, and
// why not when it does not.
func (v Version) supported() (bool, string) {
	switch {
	case v.less(oldestSupported):
		return false, fmt.Sprintf("server version %s reads the older (0.2.x) config shape, which the controller does not generate; use overrideConfig with a complete config.yaml", v)
	case v.Major == 2 && v.Minor == 0:
		return false, fmt.Sprintf("server version %s retired the tool_runtime API (and tool_groups), which 1.x providers depend on, and the controller knows no source of its config shape (it knows %s), so it does not generate one; use overrideConfig with a complete config.yaml for %s, or run a 1.x image (image-overrides, or distribution.image)", v, knownShapes, v)
	case newestSupported.less(v):
		return false, fmt.Sprintf("server version %s is newer than the config shapes the controller knows (%s); use overrideConfig with a complete config.yaml", v, knownShapes)
	}
	return true, ""
}

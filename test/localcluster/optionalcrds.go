package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// The CRDs of the controller's optional kinds, as the e2e tests and the bench install
// them: each from the Go module its project publishes (downloaded into the module
// cache, never fetched at run time).

// PrometheusOperatorModule holds the monitoring.coreos.com CRDs: the Prometheus
// Operator's own (the newest version the module proxy serves).
const PrometheusOperatorModule = "github.com/prometheus-operator/prometheus-operator@v0.94.0"

// OpenShiftAPIModule holds the Go types of route.openshift.io/v1: the newest version of
// github.com/openshift/api the module proxy serves. OpenShift serves Routes from its
// own API server, and this version ships no CRD manifest, so RouteCRD makes one from
// the module's route/v1/types.go.
const OpenShiftAPIModule = "github.com/openshift/api@v3.9.0+incompatible"

// RouteCRDName is the name of RouteCRD.
const RouteCRDName = "routes.route.openshift.io"

// moduleDir downloads module (path@version) into the module cache and returns its
// directory.
func moduleDir(ctx context.Context, module string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", module).Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", err
	}
	if mod.Error != "" {
		return "", fmt.Errorf("go mod download %s: %s", module, mod.Error)
	}
	return mod.Dir, nil
}

// PrometheusOperatorCRD returns the path of one of the Prometheus Operator module's CRD
// manifests (monitoring.coreos.com_servicemonitors.yaml, ...).
func PrometheusOperatorCRD(ctx context.Context, name string) (string, error) {
	dir, err := moduleDir(ctx, PrometheusOperatorModule)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "example", "prometheus-operator-crd", name), nil
}

// GatewayAPICRD returns the path of a CRD file of Gateway API's standard channel
// (gateway.networking.k8s.io_httproutes.yaml, ...), from the module the controller
// under root is built with.
func GatewayAPICRD(ctx context.Context, root, name string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating the sigs.k8s.io/gateway-api module: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard", name), nil
}

// RouteCRD is a CRD of route.openshift.io/v1 Route whose schema is the OpenShift API
// module's Go types, field for field (json names; strings, integers, booleans, lists,
// objects, int-or-string and times as the API encodes them), in YAML. No field is
// required: OpenShift's own validation (host names, one backend kind) is not the tests'
// to play; what the schema does is prune what the types lack.
func RouteCRD(ctx context.Context) ([]byte, error) {
	dir, err := moduleDir(ctx, OpenShiftAPIModule)
	if err != nil {
		return nil, err
	}
	file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "route", "v1", "types.go"), nil, 0)
	if err != nil {
		return nil, err
	}
	types := map[string]ast.Expr{}
	for _, decl := range file.Decls {
		if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.TYPE {
			for _, spec := range g.Specs {
				ts := spec.(*ast.TypeSpec)
				types[ts.Name.Name] = ts.Type
			}
		}
	}
	s := &goSchema{types: types}
	route, ok := types["Route"].(*ast.StructType)
	if !ok {
		return nil, fmt.Errorf("%s: route/v1 declares no struct Route", OpenShiftAPIModule)
	}
	props := s.properties(route)
	if s.err != nil {
		return nil, s.err
	}
	if props["spec"] == nil || props["status"] == nil {
		return nil, fmt.Errorf("%s: Route has no spec or status", OpenShiftAPIModule)
	}
	crd := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": RouteCRDName},
		"spec": map[string]any{
			"group": "route.openshift.io",
			"scope": "Namespaced",
			"names": map[string]any{"plural": "routes", "singular": "route", "kind": "Route", "listKind": "RouteList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"apiVersion": map[string]any{"type": "string"},
						"kind":       map[string]any{"type": "string"},
						"metadata":   map[string]any{"type": "object"},
						"spec":       props["spec"],
						"status":     props["status"],
					},
				}},
			}},
		},
	}
	return yaml.Marshal(crd)
}

// goSchema turns the Go types of one package's source into OpenAPI schemas.
type goSchema struct {
	types map[string]ast.Expr
	err   error
}

// properties are the schemas of a struct's JSON fields; embedded metadata is the
// API server's.
func (s *goSchema) properties(st *ast.StructType) map[string]any {
	props := map[string]any{}
	for _, f := range st.Fields.List {
		if f.Tag == nil || len(f.Names) != 1 {
			continue // embedded TypeMeta
		}
		tag, err := strconv.Unquote(f.Tag.Value)
		if err != nil {
			s.err = err
			continue
		}
		name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
		if name == "" || name == "-" || name == "metadata" {
			continue
		}
		props[name] = s.schema(f.Type)
	}
	return props
}

// schema is the OpenAPI schema of a field type.
func (s *goSchema) schema(e ast.Expr) map[string]any {
	switch t := e.(type) {
	case *ast.StarExpr:
		return s.schema(t.X)
	case *ast.ArrayType:
		return map[string]any{"type": "array", "items": s.schema(t.Elt)}
	case *ast.Ident:
		switch t.Name {
		case "string":
			return map[string]any{"type": "string"}
		case "bool":
			return map[string]any{"type": "boolean"}
		case "int32", "int64", "int":
			return map[string]any{"type": "integer"}
		}
		switch def := s.types[t.Name].(type) {
		case *ast.StructType:
			return map[string]any{"type": "object", "properties": s.properties(def)}
		case *ast.Ident:
			return s.schema(def)
		}
	case *ast.SelectorExpr:
		switch pkg := t.X.(*ast.Ident).Name + "." + t.Sel.Name; pkg {
		case "intstr.IntOrString":
			return map[string]any{"x-kubernetes-int-or-string": true}
		case "metav1.Time":
			return map[string]any{"type": "string", "format": "date-time"}
		case "corev1.ConditionStatus":
			return map[string]any{"type": "string"}
		}
	}
	s.err = fmt.Errorf("no schema for the Go type %#v", e)
	return map[string]any{}
}

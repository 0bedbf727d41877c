// Package revision resolves what the server pods of a LlamaStackDistribution are made
// from (a Revision: the image and server version, the config mounted and its hash, the
// CA bundle's sources, the server's certificate, the generated config) and holds the
// paths and variables through which the pods read them. A Resolver reads the CR, the
// operator ConfigMap (OperatorConfig), the ConfigMap cache and, remembered per CR, the
// live objects no cache holds; it writes nothing. pkg/controller wires a Resolver, writes
// the ConfigMaps a revision mounts, and the builders of pkg/controller/children make the
// pods of it. Nothing here needs the Controller: the package imports only the API types,
// pkg/configgen, client-go and the controller's leaf packages.
package revision

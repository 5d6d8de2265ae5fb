// Package template reads the functions of an AWS SAM template
// (AWS::Serverless::Function resources) for the gateway.
//
// It walks the YAML node tree rather than decoding into structs, so
// CloudFormation's short tags (!Ref, !Sub, !GetAtt, ...) never break
// parsing: a !Ref to a template parameter takes the parameter's Default,
// !Sub keeps its string with ${AWS::Region}-style pseudo parameters
// substituted, and a tag where a number is needed is an error that names
// the resource and the field.
package template

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Defaults of properties a function leaves unset, as SAM's.
const (
	DefaultTimeout    = 3   // seconds
	DefaultMemorySize = 128 // MB
	// DefaultReservedConcurrency is the capacity of a function without
	// ReservedConcurrentExecutions.
	DefaultReservedConcurrency = 10
)

// Function is one AWS::Serverless::Function.
type Function struct {
	// Name is FunctionName, else the resource's logical id: the name
	// clients invoke.
	Name string
	// Resource is the logical id in the template.
	Resource string
	// CodeDir is CodeUri resolved against the template's directory; Handler
	// is the handler (for a Go function, the binary's name).
	CodeDir, Handler string
	// ImageURI is ImageUri, for an image function (PackageType: Image).
	ImageURI string
	// Runtime is the Runtime property ("provided.al2023").
	Runtime string
	// Description is the Description property.
	Description string
	// Architectures is the Architectures property: ["x86_64"] when unset,
	// as SAM's.
	Architectures []string
	// Timeout is the invocation timeout in seconds; MemorySize in MB.
	Timeout, MemorySize int
	// Env is Environment.Variables.
	Env map[string]string
	// Alias is AutoPublishAlias: the alias SAM publishes the code under,
	// as version 1.
	Alias string
	// Reserved is ReservedConcurrentExecutions: the pool's capacity.
	// Provisioned is ProvisionedConcurrencyConfig.ProvisionedConcurrentExecutions:
	// the warm minimum.
	Reserved, Provisioned int
}

// Load reads and parses the template at path; a relative CodeUri becomes
// an absolute path in the template's directory.
func Load(path string) ([]Function, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	fns, err := Parse(data, dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return fns, nil
}

// Parse parses a template; dir resolves relative CodeUri paths. Functions
// are returned sorted by name.
func Parse(data []byte, dir string) ([]Function, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("template: not a YAML mapping")
	}
	root := doc.Content[0]
	p := parser{params: map[string]string{}}
	if params := get(root, "Parameters"); params != nil && params.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(params.Content); i += 2 {
			if d := get(params.Content[i+1], "Default"); d != nil && d.Kind == yaml.ScalarNode {
				p.params[params.Content[i].Value] = d.Value
			}
		}
	}
	globals := get(get(root, "Globals"), "Function")
	res := get(root, "Resources")
	if res == nil || res.Kind != yaml.MappingNode {
		return nil, errors.New("template: no Resources mapping")
	}
	var fns []Function
	seen := map[string]string{}
	for i := 0; i+1 < len(res.Content); i += 2 {
		id, r := res.Content[i].Value, res.Content[i+1]
		if t := get(r, "Type"); t == nil || t.Value != "AWS::Serverless::Function" {
			continue
		}
		f, err := p.function(id, get(r, "Properties"), globals, dir)
		if err != nil {
			return nil, fmt.Errorf("template: resource %s: %w", id, err)
		}
		if other, dup := seen[f.Name]; dup {
			return nil, fmt.Errorf("template: resource %s: FunctionName %q is also %s's", id, f.Name, other)
		}
		seen[f.Name] = id
		fns = append(fns, f)
	}
	if len(fns) == 0 {
		return nil, errors.New("template: no AWS::Serverless::Function resource")
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].Name < fns[j].Name })
	return fns, nil
}

type parser struct{ params map[string]string }

func (p parser) function(id string, props, globals *yaml.Node, dir string) (Function, error) {
	f := Function{Name: id, Resource: id, Env: map[string]string{}}
	// look finds a property, else its Globals.Function default.
	look := func(key string) *yaml.Node {
		if n := get(props, key); n != nil {
			return n
		}
		return get(globals, key)
	}
	var err error
	str := func(key string) string {
		if err != nil {
			return ""
		}
		var s string
		s, err = p.str(key, look(key))
		return s
	}
	num := func(path string, n *yaml.Node, def int) int {
		if err != nil {
			return 0
		}
		var v int
		v, err = p.num(path, n, def)
		return v
	}
	if name := str("FunctionName"); name != "" {
		f.Name = name
	}
	codeURI := str("CodeUri")
	f.Handler = str("Handler")
	f.ImageURI = str("ImageUri")
	f.Runtime = str("Runtime")
	f.Alias = str("AutoPublishAlias")
	f.Description = str("Description")
	f.Timeout = num("Timeout", look("Timeout"), DefaultTimeout)
	f.MemorySize = num("MemorySize", look("MemorySize"), DefaultMemorySize)
	f.Reserved = num("ReservedConcurrentExecutions", look("ReservedConcurrentExecutions"), DefaultReservedConcurrency)
	f.Provisioned = num("ProvisionedConcurrencyConfig.ProvisionedConcurrentExecutions",
		get(look("ProvisionedConcurrencyConfig"), "ProvisionedConcurrentExecutions"), 0)
	if err != nil {
		return f, err
	}
	if f.Architectures, err = p.architectures(look("Architectures")); err != nil {
		return f, err
	}
	for _, src := range []*yaml.Node{get(get(globals, "Environment"), "Variables"), get(get(props, "Environment"), "Variables")} {
		if src == nil {
			continue
		}
		if src.Kind != yaml.MappingNode {
			return f, errors.New("field Environment.Variables: not a mapping")
		}
		for i := 0; i+1 < len(src.Content); i += 2 {
			k := src.Content[i].Value
			v, err := p.str("Environment.Variables."+k, src.Content[i+1])
			if err != nil {
				return f, err
			}
			f.Env[k] = v
		}
	}
	switch {
	case f.Timeout < 1 || f.Timeout > 900:
		return f, fmt.Errorf("field Timeout: %d is not within 1..900 seconds", f.Timeout)
	case f.MemorySize < 128 || f.MemorySize > 10240:
		return f, fmt.Errorf("field MemorySize: %d is not within 128..10240 MB", f.MemorySize)
	case f.Reserved < 1:
		return f, fmt.Errorf("field ReservedConcurrentExecutions: %d: the gateway needs a capacity of at least 1", f.Reserved)
	case f.Provisioned < 0 || f.Provisioned > f.Reserved:
		return f, fmt.Errorf("field ProvisionedConcurrencyConfig.ProvisionedConcurrentExecutions: %d is not within 0..ReservedConcurrentExecutions (%d)", f.Provisioned, f.Reserved)
	case f.Alias != "" && !aliasRE.MatchString(f.Alias):
		return f, fmt.Errorf("field AutoPublishAlias: %q is not an alias name (letters, digits, - and _, not only digits, at most 128)", f.Alias)
	case codeURI == "" && f.ImageURI == "":
		return f, errors.New("field CodeUri: missing (or ImageUri for an image function)")
	}
	if codeURI != "" {
		if strings.Contains(codeURI, "://") {
			return f, fmt.Errorf("field CodeUri: %q: only local directories are supported", codeURI)
		}
		f.CodeDir = codeURI
		if !filepath.IsAbs(codeURI) {
			f.CodeDir = filepath.Join(dir, codeURI)
		}
	}
	return f, nil
}

// str reads a scalar, resolving !Ref to a parameter's Default and !Sub's
// ${Param} and pseudo parameters; other tags are errors naming path.
func (p parser) str(path string, n *yaml.Node) (string, error) {
	if n == nil {
		return "", nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("field %s: not a scalar", path)
	}
	switch n.Tag {
	case "!Ref":
		if v, ok := p.params[n.Value]; ok {
			return v, nil
		}
		if v, ok := pseudo[n.Value]; ok {
			return v, nil
		}
		return "", fmt.Errorf("field %s: !Ref %s: no parameter with a Default of that name", path, n.Value)
	case "!Sub":
		// "${!Literal}" is CloudFormation's escape for a literal "${Literal}".
		out := os.Expand(strings.ReplaceAll(n.Value, "${!", "\x00"), func(k string) string {
			if v, ok := p.params[k]; ok {
				return v
			}
			if v, ok := pseudo[k]; ok {
				return v
			}
			return "${" + k + "}"
		})
		return strings.ReplaceAll(out, "\x00", "${"), nil
	case "", "!!str", "!!int", "!!bool", "!!float", "!!null":
		return n.Value, nil
	}
	return "", fmt.Errorf("field %s: %s is not supported by the gateway", path, n.Tag)
}

// architectures reads Architectures: one of x86_64 and arm64, as Lambda
// takes.
func (p parser) architectures(n *yaml.Node) ([]string, error) {
	if n == nil {
		return []string{"x86_64"}, nil
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) != 1 {
		return nil, errors.New("field Architectures: not a list of one architecture")
	}
	a, err := p.str("Architectures", n.Content[0])
	if err != nil {
		return nil, err
	}
	if a != "x86_64" && a != "arm64" {
		return nil, fmt.Errorf("field Architectures: %q is neither x86_64 nor arm64", a)
	}
	return []string{a}, nil
}

func (p parser) num(path string, n *yaml.Node, def int) (int, error) {
	if n == nil {
		return def, nil
	}
	s, err := p.str(path, n)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("field %s: %q is not an integer", path, s)
	}
	return v, nil
}

// aliasRE is what Lambda takes as an alias name; one of digits only would
// be a version.
var aliasRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{0,127}[a-zA-Z_-][a-zA-Z0-9_-]{0,127}$`)

// pseudo are the values the gateway gives CloudFormation's pseudo parameters.
var pseudo = map[string]string{
	"AWS::Region":    "local",
	"AWS::AccountId": "000000000000",
	"AWS::Partition": "aws",
	"AWS::StackName": "ttlkit-gateway",
}

// get returns the value of key in mapping n, or nil.
func get(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

package template_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/gateway/template"
)

// The demo template shipped with the example: every field the gateway
// reads, Globals, !Ref, !Sub, and a !GetAtt in a field it does not read.
func TestDemoTemplate(t *testing.T) {
	fns, err := template.Load("../template.yaml")
	require.NoError(t, err)
	require.Len(t, fns, 3)
	assert.Equal(t, []string{"echo", "hello", "slow"}, []string{fns[0].Name, fns[1].Name, fns[2].Name}, "sorted by name")

	dir, err := filepath.Abs("..")
	require.NoError(t, err)
	hello := fns[1]
	assert.Equal(t, template.Function{
		Name:     "hello",
		Resource: "HelloFunction",
		CodeDir:  filepath.Join(dir, "functions/hello"),
		Handler:  "bootstrap",
		Runtime:  "provided.al2023",
		Timeout:  10, MemorySize: 128,
		Env:           map[string]string{"GREETING": "Hello", "STAGE": "ttlkit-gateway-demo"},
		Alias:         "live",
		Description:   "Greets whoever it is given.",
		Architectures: []string{"x86_64"},
		Reserved:      3, Provisioned: 1,
	}, hello)
	assert.Equal(t, 5, fns[2].Timeout, "a property overrides Globals")
	assert.Equal(t, 10, fns[0].Timeout, "Globals apply")
	assert.Equal(t, 2, fns[0].Reserved)
	assert.Equal(t, 0, fns[0].Provisioned)
	assert.Empty(t, fns[0].Env)
	assert.Empty(t, fns[0].Alias, "no AutoPublishAlias: $LATEST only")
}

// The Docker demo template: image functions, with the tag from !Sub.
func TestDockerDemoTemplate(t *testing.T) {
	fns, err := template.Load("../template-docker.yaml")
	require.NoError(t, err)
	require.Len(t, fns, 3)
	for _, f := range fns {
		assert.Equal(t, "ttlkit-gateway/"+f.Name+":demo", f.ImageURI)
		assert.Empty(t, f.CodeDir)
	}
	assert.Equal(t, 256, fns[0].MemorySize)
	assert.Equal(t, map[string]string{"GREETING": "Bonjour"}, fns[1].Env)
	assert.Equal(t, 5, fns[2].Timeout)
}

func parse(t *testing.T, src string) []template.Function {
	t.Helper()
	fns, err := template.Parse([]byte(src), "/srv/app")
	require.NoError(t, err)
	return fns
}

func TestDefaults(t *testing.T) {
	fns := parse(t, `
Resources:
  Plain:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: fn/
`)
	require.Len(t, fns, 1)
	f := fns[0]
	assert.Equal(t, "Plain", f.Name, "the logical id when FunctionName is unset")
	assert.Equal(t, "Plain", f.Resource)
	assert.Equal(t, "/srv/app/fn", f.CodeDir, "CodeUri resolves against the template's directory")
	assert.Equal(t, template.DefaultTimeout, f.Timeout)
	assert.Equal(t, template.DefaultMemorySize, f.MemorySize)
	assert.Equal(t, template.DefaultReservedConcurrency, f.Reserved)
	assert.Zero(t, f.Provisioned)
	assert.Empty(t, f.ImageURI)
	assert.NotNil(t, f.Env)
}

func TestFields(t *testing.T) {
	fns := parse(t, `
Parameters:
  Stage:
    Type: String
    Default: prod
  Repo:
    Type: String
    Default: registry.local/fns
  Cap:
    Type: Number
    Default: 4
Globals:
  Function:
    Timeout: 20
    Environment:
      Variables:
        SHARED: "1"
        OVERRIDDEN: global
Resources:
  Bucket:
    Type: AWS::S3::Bucket
    Properties:
      BucketName: !Sub "${AWS::StackName}-${Stage}"
      Tags: !GetAtt Something.Tags
  ImageFn:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: !Sub "img-${Stage}"
      PackageType: Image
      ImageUri: !Sub "${Repo}/img:${Stage}-${AWS::Region}-${AWS::AccountId}"
      MemorySize: 1024
      Timeout: 900
      ReservedConcurrentExecutions: !Ref Cap
      ProvisionedConcurrencyConfig:
        ProvisionedConcurrentExecutions: 4
      Role: !GetAtt FnRole.Arn
      Events:
        Api:
          Type: Api
          Properties:
            RestApiId: !Ref Api
      Environment:
        Variables:
          REGION: !Ref AWS::Region
          LITERAL: !Sub "${!NotExpanded}"
          UNKNOWN: !Sub "${Nope}"
          OVERRIDDEN: local
          NUMBER: 42
          EMPTY: ""
  CodeFn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: /abs/code
      Handler: main
      Runtime: go1.x
`)
	require.Len(t, fns, 2)
	code, img := fns[0], fns[1]
	assert.Equal(t, "CodeFn", code.Name)
	assert.Equal(t, "/abs/code", code.CodeDir, "an absolute CodeUri stays")
	assert.Equal(t, "main", code.Handler)
	assert.Equal(t, "go1.x", code.Runtime)
	assert.Equal(t, 20, code.Timeout)
	assert.Equal(t, map[string]string{"SHARED": "1", "OVERRIDDEN": "global"}, code.Env)

	assert.Equal(t, "img-prod", img.Name)
	assert.Equal(t, "ImageFn", img.Resource)
	assert.Equal(t, "registry.local/fns/img:prod-local-000000000000", img.ImageURI)
	assert.Empty(t, img.CodeDir)
	assert.Equal(t, 1024, img.MemorySize)
	assert.Equal(t, 900, img.Timeout)
	assert.Equal(t, 4, img.Reserved, "!Ref to a parameter's Default")
	assert.Equal(t, 4, img.Provisioned)
	assert.Equal(t, map[string]string{
		"SHARED": "1", "OVERRIDDEN": "local", "REGION": "local",
		"LITERAL": "${NotExpanded}", "UNKNOWN": "${Nope}", "NUMBER": "42", "EMPTY": "",
	}, img.Env)
}

// AutoPublishAlias, from a property or Globals, with !Ref: the alias the
// function's code is published under (as version 1).
func TestAutoPublishAlias(t *testing.T) {
	fns := parse(t, `
Parameters:
  Stage: {Type: String, Default: prod}
Globals:
  Function:
    AutoPublishAlias: !Ref Stage
Resources:
  A:
    Type: AWS::Serverless::Function
    Properties: {CodeUri: a}
  B:
    Type: AWS::Serverless::Function
    Properties: {CodeUri: b, AutoPublishAlias: live}
`)
	assert.Equal(t, "prod", fns[0].Alias)
	assert.Equal(t, "live", fns[1].Alias)
}

// Architectures, from a property or Globals; x86_64 when unset, as SAM's.
func TestArchitectures(t *testing.T) {
	fns := parse(t, `
Globals:
  Function:
    Architectures: [arm64]
Resources:
  A:
    Type: AWS::Serverless::Function
    Properties: {CodeUri: a}
  B:
    Type: AWS::Serverless::Function
    Properties: {CodeUri: b, Architectures: [x86_64]}
`)
	assert.Equal(t, []string{"arm64"}, fns[0].Architectures)
	assert.Equal(t, []string{"x86_64"}, fns[1].Architectures)
	assert.Equal(t, []string{"x86_64"}, parse(t, "Resources:\n  A:\n    Type: AWS::Serverless::Function\n    Properties: {CodeUri: a}\n")[0].Architectures)
}

// Every error names the resource and the field, and nothing is returned.
func TestErrors(t *testing.T) {
	fn := func(props string) string {
		return "Resources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Properties:\n" + props
	}
	for _, c := range []struct {
		name, src, want string
	}{
		{"yaml", "Resources: [", "template: yaml:"},
		{"not a mapping", "- a\n- b\n", "template: not a YAML mapping"},
		{"empty", "", "template: not a YAML mapping"},
		{"no resources", "Globals: {}\n", "template: no Resources mapping"},
		{"no function", "Resources:\n  B:\n    Type: AWS::S3::Bucket\n", "no AWS::Serverless::Function resource"},
		{"timeout not a number", fn("      CodeUri: x\n      Timeout: five\n"), `resource Fn: field Timeout: "five" is not an integer`},
		{"timeout zero", fn("      CodeUri: x\n      Timeout: 0\n"), "resource Fn: field Timeout: 0 is not within 1..900"},
		{"timeout too long", fn("      CodeUri: x\n      Timeout: 901\n"), "resource Fn: field Timeout: 901"},
		{"memory", fn("      CodeUri: x\n      MemorySize: 64\n"), "resource Fn: field MemorySize: 64 is not within 128..10240 MB"},
		{"memory too much", fn("      CodeUri: x\n      MemorySize: 10241\n"), "resource Fn: field MemorySize: 10241"},
		{"reserved zero", fn("      CodeUri: x\n      ReservedConcurrentExecutions: 0\n"), "resource Fn: field ReservedConcurrentExecutions: 0"},
		{"reserved getatt", fn("      CodeUri: x\n      ReservedConcurrentExecutions: !GetAtt Other.Count\n"), "resource Fn: field ReservedConcurrentExecutions: !GetAtt is not supported"},
		{"reserved mapping", fn("      CodeUri: x\n      ReservedConcurrentExecutions: {a: 1}\n"), "resource Fn: field ReservedConcurrentExecutions: not a scalar"},
		{"provisioned above reserved", fn("      CodeUri: x\n      ReservedConcurrentExecutions: 2\n      ProvisionedConcurrencyConfig:\n        ProvisionedConcurrentExecutions: 3\n"),
			"resource Fn: field ProvisionedConcurrencyConfig.ProvisionedConcurrentExecutions: 3 is not within 0..ReservedConcurrentExecutions (2)"},
		{"provisioned negative", fn("      CodeUri: x\n      ProvisionedConcurrencyConfig:\n        ProvisionedConcurrentExecutions: -1\n"),
			"resource Fn: field ProvisionedConcurrencyConfig.ProvisionedConcurrentExecutions: -1"},
		{"no code", fn("      Timeout: 3\n"), "resource Fn: field CodeUri: missing (or ImageUri"},
		{"remote code", fn("      CodeUri: s3://bucket/key.zip\n"), `resource Fn: field CodeUri: "s3://bucket/key.zip": only local directories`},
		{"ref unknown", fn("      CodeUri: !Ref Nowhere\n"), "resource Fn: field CodeUri: !Ref Nowhere: no parameter with a Default"},
		{"image if", fn("      ImageUri: !If [c, a, b]\n"), "resource Fn: field ImageUri: not a scalar"},
		{"handler tag", fn("      CodeUri: x\n      Handler: !ImportValue shared\n"), "resource Fn: field Handler: !ImportValue is not supported"},
		{"env not a mapping", fn("      CodeUri: x\n      Environment:\n        Variables: [a]\n"), "resource Fn: field Environment.Variables: not a mapping"},
		{"env value", fn("      CodeUri: x\n      Environment:\n        Variables:\n          A: {b: c}\n"), "resource Fn: field Environment.Variables.A: not a scalar"},
		{"env getatt", fn("      CodeUri: x\n      Environment:\n        Variables:\n          TABLE: !GetAtt Table.Arn\n"), "resource Fn: field Environment.Variables.TABLE: !GetAtt is not supported"},
		{"alias digits", fn("      CodeUri: x\n      AutoPublishAlias: 12\n"), `resource Fn: field AutoPublishAlias: "12" is not an alias name`},
		{"alias latest", fn("      CodeUri: x\n      AutoPublishAlias: $LATEST\n"), `resource Fn: field AutoPublishAlias: "$LATEST" is not an alias name`},
		{"architecture", fn("      CodeUri: x\n      Architectures: [sparc]\n"), `resource Fn: field Architectures: "sparc" is neither x86_64 nor arm64`},
		{"architectures two", fn("      CodeUri: x\n      Architectures: [x86_64, arm64]\n"), `resource Fn: field Architectures: not a list of one architecture`},
		{"duplicate name", "Resources:\n  A:\n    Type: AWS::Serverless::Function\n    Properties: {CodeUri: x, FunctionName: f}\n  B:\n    Type: AWS::Serverless::Function\n    Properties: {CodeUri: y, FunctionName: f}\n",
			`resource B: FunctionName "f" is also A's`},
	} {
		t.Run(c.name, func(t *testing.T) {
			fns, err := template.Parse([]byte(c.src), "/srv")
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Nil(t, fns)
		})
	}
}

func TestLoad(t *testing.T) {
	_, err := template.Load(filepath.Join(t.TempDir(), "missing.yaml"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	path := filepath.Join(t.TempDir(), "template.yaml")
	require.NoError(t, os.WriteFile(path, []byte("Resources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Properties:\n      CodeUri: code\n      Timeout: x\n"), 0o644))
	_, err = template.Load(path)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), path+": template: resource Fn: field Timeout"), err.Error())

	require.NoError(t, os.WriteFile(path, []byte("Resources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Properties:\n      CodeUri: code\n"), 0o644))
	fns, err := template.Load(path)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(filepath.Dir(path), "code"), fns[0].CodeDir, "relative to the template's directory")
}

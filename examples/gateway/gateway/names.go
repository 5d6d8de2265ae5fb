package gateway

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/ttlkit/ttlkit/examples/gateway/template"
)

// Account is the AWS account id of the gateway's function ARNs.
const Account = "000000000000"

// Latest is the version a function's code in the template is: $LATEST.
const Latest = "$LATEST"

// published is the version a template's AutoPublishAlias points to: the
// gateway publishes the template's code once.
const published = "1"

// functionARN returns the ARN of function fn in region, with qualifier
// (a version or an alias) when it is not empty.
func functionARN(region, fn, qualifier string) string {
	a := "arn:aws:lambda:" + region + ":" + Account + ":function:" + fn
	if qualifier != "" {
		a += ":" + qualifier
	}
	return a
}

// apiError is an answer in the Lambda API's error shape.
type apiError struct {
	status    int
	exception string
	message   string
}

func (e *apiError) write(w http.ResponseWriter) { lambdaError(w, e.status, e.exception, e.message) }

// functionName returns the function and the qualifier (version or alias)
// a FunctionName names, as Lambda takes them: the function's name, its ARN
// (arn:aws:lambda:region:account:function:name), a partial ARN
// (account:function:name), each with an optional ":qualifier", or a
// Qualifier query parameter; bad says, in Lambda's words, what is wrong
// with them. The gateway serves any region and account.
func functionName(name, query string) (fn, qualifier, bad string) {
	parts := strings.Split(name, ":")
	switch {
	case len(parts) >= 7 && parts[0] == "arn" && parts[2] == "lambda" && parts[5] == "function":
		parts = parts[6:]
	case len(parts) >= 3 && parts[1] == "function":
		parts = parts[2:]
	}
	switch len(parts) {
	case 1:
		fn = parts[0]
	case 2:
		fn, qualifier = parts[0], parts[1]
	default:
		return "", "", "FunctionName " + strconv.Quote(name) + " is not a function name or ARN"
	}
	switch {
	case fn == "":
		return "", "", "FunctionName " + strconv.Quote(name) + " is not a function name or ARN"
	case query == "":
	case qualifier == "":
		qualifier = query
	case qualifier != query:
		return "", "", "The derived qualifier from the function name does not match the specified qualifier."
	}
	return fn, qualifier, ""
}

// resolve returns the function a request names (see functionName), the
// version its qualifier resolves to and the qualifier itself, or the
// error Lambda answers: $LATEST always exists, version 1 and the alias
// only for a function with AutoPublishAlias; any other qualifier, like an
// unknown function, is ResourceNotFoundException, with the ARN in the
// region the client signed for.
func (g *Gateway) resolve(region, name, query string) (f template.Function, version, qualifier string, err *apiError) {
	fn, qualifier, bad := functionName(name, query)
	if bad != "" {
		return f, "", "", &apiError{http.StatusBadRequest, "InvalidParameterValueException", bad}
	}
	f, ok := g.Function(fn)
	if ok {
		if version, ok = versionOf(f, qualifier); ok {
			return f, version, qualifier, nil
		}
	}
	return f, "", "", &apiError{http.StatusNotFound, "ResourceNotFoundException", "Function not found: " + functionARN(region, fn, qualifier)}
}

// versionOf returns the version qualifier names in f.
func versionOf(f template.Function, qualifier string) (string, bool) {
	switch {
	case qualifier == "" || qualifier == Latest:
		return Latest, true
	case f.Alias != "" && (qualifier == f.Alias || qualifier == published):
		return published, true
	}
	return "", false
}

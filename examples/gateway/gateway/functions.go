package gateway

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/ttlkit/ttlkit/examples/gateway/template"
)

// The Lambda API's read operations on functions: ListFunctions,
// GetFunction and GetFunctionConfiguration, answered from the template.

// maxListItems is the most functions a page of ListFunctions holds, as
// Lambda's (it takes a MaxItems up to 10,000 and answers at most 50).
const maxListItems = 50

// FunctionConfiguration is a function's configuration as the Lambda API
// answers it: what the template says of it, and its state: Pending while
// its code builds, Active, or Failed, with the reason of the other two.
type FunctionConfiguration struct {
	FunctionName     string
	FunctionArn      string
	Runtime          string `json:",omitempty"`
	Handler          string `json:",omitempty"`
	Description      string
	Timeout          int
	MemorySize       int
	LastModified     string
	Version          string
	Environment      *Environment `json:",omitempty"`
	PackageType      string
	Architectures    []string
	State            State
	StateReason      string `json:",omitempty"`
	StateReasonCode  string `json:",omitempty"`
	LastUpdateStatus string `json:",omitempty"`
	EphemeralStorage struct{ Size int }
	TracingConfig    struct{ Mode string }
}

// Environment is a function's environment variables.
type Environment struct{ Variables map[string]string }

// configuration returns f's configuration as version, named by qualifier,
// in region.
func (g *Gateway) configuration(region string, f template.Function, version, qualifier string) FunctionConfiguration {
	c := FunctionConfiguration{
		FunctionName: f.Name, FunctionArn: functionARN(region, f.Name, qualifier),
		Runtime: f.Runtime, Handler: f.Handler, Description: f.Description,
		Timeout: f.Timeout, MemorySize: f.MemorySize,
		LastModified: g.fns.Load().loaded.UTC().Format("2006-01-02T15:04:05.000-0700"),
		Version:      version, PackageType: "Zip", Architectures: f.Architectures,
	}
	st := g.status(f.Name)
	c.State, c.StateReason, c.StateReasonCode = st.State, st.Reason, st.ReasonCode
	if st.State == StateActive {
		c.LastUpdateStatus = "Successful"
	}
	if f.ImageURI != "" {
		// As Lambda: an image function has neither runtime nor handler.
		c.PackageType, c.Runtime, c.Handler = "Image", "", ""
	}
	if len(f.Env) > 0 {
		c.Environment = &Environment{Variables: f.Env}
	}
	c.EphemeralStorage.Size = 512
	c.TracingConfig.Mode = "PassThrough"
	return c
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// handleListFunctions answers ListFunctions: the template's functions by
// name, their $LATEST, a page of at most MaxItems (and 50) after Marker,
// with the NextMarker of the next page.
func handleListFunctions(g *Gateway) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit := maxListItems
		if s := q.Get("MaxItems"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 10000 {
				lambdaError(w, http.StatusBadRequest, "InvalidParameterValueException",
					"1 validation error detected: Value '"+s+"' at 'maxItems' failed to satisfy constraint: Member must have value between 1 and 10000")
				return
			}
			limit = min(n, maxListItems)
		}
		if v := q.Get("FunctionVersion"); v != "" && v != "ALL" {
			lambdaError(w, http.StatusBadRequest, "InvalidParameterValueException",
				"1 validation error detected: Value '"+v+"' at 'functionVersion' failed to satisfy constraint: Member must satisfy enum value set: [ALL]")
			return
		}
		fs := g.fns.Load()
		names := slices.Sorted(maps.Keys(fs.byName))
		from := 0
		if m := q.Get("Marker"); m != "" {
			// A marker is the name the next page starts at, encoded; a
			// function taken out of the template since is skipped.
			after, err := base64.RawURLEncoding.DecodeString(m)
			if err != nil {
				lambdaError(w, http.StatusBadRequest, "InvalidParameterValueException", "Invalid Marker: "+m)
				return
			}
			from, _ = slices.BinarySearch(names, string(after))
		}
		region := request(r).region
		out := struct {
			Functions  []FunctionConfiguration
			NextMarker string `json:",omitempty"`
		}{Functions: []FunctionConfiguration{}}
		for _, n := range names[from:min(from+limit, len(names))] {
			out.Functions = append(out.Functions, g.configuration(region, fs.byName[n], Latest, ""))
		}
		if from+limit < len(names) {
			out.NextMarker = base64.RawURLEncoding.EncodeToString([]byte(names[from+limit]))
		}
		writeJSON(w, out)
	})
}

// handleGetFunction answers GetFunction: the configuration, where the code
// is for an image function, and the capacity.
func handleGetFunction(g *Gateway) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		region := request(r).region
		f, version, qualifier, apiErr := g.resolve(region, r.PathValue("name"), r.URL.Query().Get("Qualifier"))
		if apiErr != nil {
			apiErr.write(w)
			return
		}
		type code struct{ RepositoryType, ImageUri string } // the Lambda API's names
		out := struct {
			Configuration FunctionConfiguration
			Code          *code `json:",omitempty"`
			Concurrency   struct{ ReservedConcurrentExecutions int }
		}{Configuration: g.configuration(region, f, version, qualifier)}
		if f.ImageURI != "" {
			out.Code = &code{RepositoryType: "ECR", ImageUri: f.ImageURI}
		}
		out.Concurrency.ReservedConcurrentExecutions = f.Reserved
		writeJSON(w, out)
	})
}

// handleGetFunctionConfiguration answers GetFunctionConfiguration.
func handleGetFunctionConfiguration(g *Gateway) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		region := request(r).region
		f, version, qualifier, apiErr := g.resolve(region, r.PathValue("name"), r.URL.Query().Get("Qualifier"))
		if apiErr != nil {
			apiErr.write(w)
			return
		}
		writeJSON(w, g.configuration(region, f, version, qualifier))
	})
}

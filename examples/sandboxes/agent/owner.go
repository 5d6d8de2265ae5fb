package agent

import (
	"encoding/json"
	"io"
	"net/http"
)

// MaxOwner bounds the bytes of an owner's name.
const MaxOwner = 256

// OwnerBody is the body of PUT /owner and of GET /owner's reply.
type OwnerBody struct {
	Owner string `json:"owner"`
}

// The owner is the name of whom the sandbox serves (the backend's
// conversation). The backend sets it once, when it assigns the sandbox and
// before any command runs there; it cannot change afterwards, so that the
// sandbox's own commands (which can reach their agent) cannot make it
// another's. It lives as long as the agent: an instance of the backend that
// lost its records of the assignments asks each sandbox whose it is.

func (s *Server) getOwner(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	owner := s.owner
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, OwnerBody{Owner: owner})
}

func (s *Server) setOwner(w http.ResponseWriter, r *http.Request) {
	var body OwnerBody
	if err := json.NewDecoder(io.LimitReader(r.Body, 2*MaxOwner+64)).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "owner: body is not {\"owner\": \"...\"}: %v", err)
		return
	}
	if body.Owner == "" || len(body.Owner) > MaxOwner {
		writeError(w, http.StatusBadRequest, "owner: 1 to %d bytes", MaxOwner)
		return
	}
	s.mu.Lock()
	cur := s.owner
	if cur == "" {
		s.owner = body.Owner
	}
	s.mu.Unlock()
	if cur != "" && cur != body.Owner {
		writeError(w, http.StatusConflict, "owner: the sandbox is %q's", cur)
		return
	}
	writeJSON(w, http.StatusOK, OwnerBody{Owner: body.Owner})
}

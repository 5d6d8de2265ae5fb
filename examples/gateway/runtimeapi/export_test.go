package runtimeapi

// Ended reports whether worker id is gone for the server: never added,
// Gone, or ended by its runtime's init error.
func (s *Server) Ended(id string) bool {
	w := s.worker(id)
	if w == nil {
		return true
	}
	select {
	case <-w.gone:
		return true
	default:
		return false
	}
}

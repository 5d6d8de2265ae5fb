package redisttl

// SetBeforeExec makes b's Remove call f between reading the scores and the
// EXEC that deletes the unchanged members.
func SetBeforeExec(b *Buffer, f func()) { b.beforeExec = f }

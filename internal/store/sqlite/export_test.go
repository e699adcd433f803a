package sqlite

import "database/sql"

// SetSchemaVersionForTest pretends a newer program migrated the database.
func SetSchemaVersionForTest(path string, v int) error {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(`UPDATE schema_version SET version = ?`, v)
	return err
}

//! The migrations are embedded in the library: a new or changed migration rebuilds it.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=migrations-postgres");
    println!("cargo:rerun-if-changed=migrations-sqlite");
}

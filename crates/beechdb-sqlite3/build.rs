//! The C library answers to the name programs linked against SQLite look for.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsqlite3.so.0");
}

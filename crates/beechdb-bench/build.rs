// Builds the Berkeley DB shim when the `peers` feature is on (needs Debian's libdb5.3-dev).
fn main() {
    #[cfg(feature = "peers")]
    {
        println!("cargo:rerun-if-changed=csrc/bdb_shim.c");
        cc::Build::new()
            .file("csrc/bdb_shim.c")
            .opt_level(2)
            .compile("bdb_shim");
        println!("cargo:rustc-link-lib=db-5.3");
    }
}

// The translation unit that compiles lib/thirdparty/precompiled.hpp into the precompiled header
// the project's targets share (cmake/OptkitPrecompiledHeaders.cmake); it has no code of its own.

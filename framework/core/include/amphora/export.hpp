#pragma once
// What Amphora's shared libraries export. They are built with hidden
// symbols; every installed header wraps its declarations in
// AMPHORA_API_BEGIN ... AMPHORA_API_END, so what a header declares is the
// libraries' interface and everything else stays inside them (a linker
// version script, cmake/amphora.map, also keeps out the instantiations of
// other libraries' templates).

#if defined(__GNUC__) || defined(__clang__)
#define AMPHORA_API_BEGIN _Pragma("GCC visibility push(default)")
#define AMPHORA_API_END _Pragma("GCC visibility pop")
/// On a class an installed header only names (a friend, a pointer) and the
/// libraries keep to themselves.
#define AMPHORA_INTERNAL __attribute__((visibility("hidden")))
#else
#define AMPHORA_API_BEGIN
#define AMPHORA_API_END
#define AMPHORA_INTERNAL
#endif

#include "launcher/clone_vm.h"

#include <sys/syscall.h>

#include <cerrno>

namespace allot {

#if defined(__x86_64__)
extern "C" long allot_launcher_clone3_vm(clone_args* args, size_t size, int (*fn)(void*), void* arg);
// rdi = args, rsi = size, rdx = fn, rcx = arg. The syscall keeps every
// register but rax, rcx and r11, and the child starts with the parent's
// registers, rax = 0 and rsp = stack + stack_size (16-byte aligned by the
// caller, so the call below keeps the ABI's alignment).
asm(R"(
    .pushsection .text
    .globl allot_launcher_clone3_vm
    .hidden allot_launcher_clone3_vm
    .type allot_launcher_clone3_vm, @function
allot_launcher_clone3_vm:
    .cfi_startproc
    mov %rdx, %r8
    mov %rcx, %r9
    mov $435, %eax
    syscall
    test %rax, %rax
    jz 1f
    ret
1:
    .cfi_undefined rip
    xor %ebp, %ebp
    mov %r9, %rdi
    call *%r8
    mov %eax, %edi
    mov $60, %eax
    syscall
    hlt
    .cfi_endproc
    .size allot_launcher_clone3_vm, .-allot_launcher_clone3_vm
    .popsection
)");
static_assert(SYS_clone3 == 435 && SYS_exit == 60);

pid_t clone3SharingMemory(clone_args* args, int (*fn)(void*), void* arg) {
  long pid = allot_launcher_clone3_vm(args, sizeof *args, fn, arg);
  if (pid < 0) {
    errno = static_cast<int>(-pid);
    return -1;
  }
  return static_cast<pid_t>(pid);
}
#else
pid_t clone3SharingMemory(clone_args*, int (*)(void*), void*) {
  errno = ENOSYS;
  return -1;
}
#endif

}  // namespace allot

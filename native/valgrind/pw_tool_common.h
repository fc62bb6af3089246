/* What pinwise's two Valgrind tools share: the tracer (pw_main.c) and the cache simulator
   (ps_main.c). Included once by each; everything is static. */
#ifndef PW_TOOL_COMMON_H
#define PW_TOOL_COMMON_H

/* Called for each data access a statement makes: its address expression, size in bytes, guard
   (NULL: always) and whether it writes. A read-modify-write (CAS, a dirty helper that modifies
   memory) is one write, as cachegrind counts a modify once. */
typedef void (*AccessNote)(void* context, IRExpr* address, Int size, IRExpr* guard, Bool is_write);

__attribute__((unused)) static void visit_access(IRSB* in, IRStmt* st, AccessNote note, void* context)
{
   switch (st->tag) {
      case Ist_WrTmp: {
         IRExpr* data = st->Ist.WrTmp.data;
         if (data->tag == Iex_Load) note(context, data->Iex.Load.addr, sizeofIRType(data->Iex.Load.ty), NULL, False);
         break;
      }
      case Ist_Store:
         note(context, st->Ist.Store.addr, sizeofIRType(typeOfIRExpr(in->tyenv, st->Ist.Store.data)), NULL, True);
         break;
      case Ist_StoreG: {
         IRStoreG* sg = st->Ist.StoreG.details;
         note(context, sg->addr, sizeofIRType(typeOfIRExpr(in->tyenv, sg->data)), sg->guard, True);
         break;
      }
      case Ist_LoadG: {
         IRLoadG* lg = st->Ist.LoadG.details;
         IRType ty = Ity_INVALID, wide = Ity_INVALID;
         typeOfIRLoadGOp(lg->cvt, &wide, &ty);
         note(context, lg->addr, sizeofIRType(ty), lg->guard, False);
         break;
      }
      case Ist_Dirty: {
         IRDirty* d = st->Ist.Dirty.details;
         if (d->mFx != Ifx_None && d->mAddr != NULL) note(context, d->mAddr, d->mSize, NULL, d->mFx != Ifx_Read);
         break;
      }
      case Ist_CAS: {
         IRCAS* cas = st->Ist.CAS.details;
         Int size = sizeofIRType(typeOfIRExpr(in->tyenv, cas->dataLo)) * (cas->dataHi ? 2 : 1);
         note(context, cas->addr, size, NULL, True);
         break;
      }
      case Ist_LLSC: {
         IRType ty = st->Ist.LLSC.storedata == NULL ? typeOfIRTemp(in->tyenv, st->Ist.LLSC.result)
                                                    : typeOfIRExpr(in->tyenv, st->Ist.LLSC.storedata);
         note(context, st->Ist.LLSC.addr, sizeofIRType(ty), NULL, st->Ist.LLSC.storedata != NULL);
         break;
      }
      default:
         break;
   }
}

/* Buffered output to one file descriptor. */
static Int out_fd = -1;
static HChar out_buf[1 << 16];
static Int out_len = 0;

__attribute__((unused)) static void out_flush(void)
{
   if (out_len > 0 && out_fd >= 0) VG_(write)(out_fd, out_buf, out_len);
   out_len = 0;
}

/* Flat IR for inline instrumentation: an expression into a new temporary, a 64-bit constant. */
__attribute__((unused)) static IRExpr* tmp_of(IRSB* sb, IRType ty, IRExpr* e)
{
   IRTemp t = newIRTemp(sb->tyenv, ty);
   addStmtToIRSB(sb, IRStmt_WrTmp(t, e));
   return IRExpr_RdTmp(t);
}

__attribute__((unused)) static IRExpr* u64(ULong value) { return IRExpr_Const(IRConst_U64(value)); }

__attribute__((unused)) static void out_printf(const HChar* format, ULong value)
{
   if (out_len > (Int)sizeof out_buf - 64) out_flush();
   out_len += VG_(snprintf)(out_buf + out_len, sizeof out_buf - out_len, format, value);
}

__attribute__((unused)) static void out_text(const HChar* text)
{
   Int n = (Int)VG_(strlen)(text);
   if (out_len + n >= (Int)sizeof out_buf) out_flush();
   if (n >= (Int)sizeof out_buf) {
      if (out_fd >= 0) VG_(write)(out_fd, text, n);
      return;
   }
   VG_(memcpy)(out_buf + out_len, text, n);
   out_len += n;
}

#endif

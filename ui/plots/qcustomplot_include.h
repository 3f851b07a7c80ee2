// <qcustomplot.h> uses Qt's keyword macros (signals, slots, emit, foreach), which Lathe turns off
// with QT_NO_KEYWORDS; they are defined around the include only.
#pragma once

#ifndef signals
#define signals Q_SIGNALS
#define LATHE_UNDEF_SIGNALS
#endif
#ifndef slots
#define slots Q_SLOTS
#define LATHE_UNDEF_SLOTS
#endif
#ifndef emit
#define emit Q_EMIT
#define LATHE_UNDEF_EMIT
#endif
#ifndef foreach
#define foreach Q_FOREACH
#define LATHE_UNDEF_FOREACH
#endif

#include <qcustomplot.h>

#ifdef LATHE_UNDEF_SIGNALS
#undef signals
#undef LATHE_UNDEF_SIGNALS
#endif
#ifdef LATHE_UNDEF_SLOTS
#undef slots
#undef LATHE_UNDEF_SLOTS
#endif
#ifdef LATHE_UNDEF_EMIT
#undef emit
#undef LATHE_UNDEF_EMIT
#endif
#ifdef LATHE_UNDEF_FOREACH
#undef foreach
#undef LATHE_UNDEF_FOREACH
#endif

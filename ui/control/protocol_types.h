// Lets the control-channel messages travel through Qt signals (queued connections, QSignalSpy).
#pragma once

#include "engine/protocol/messages.h"

#include <QMetaType>

Q_DECLARE_METATYPE(lathe::protocol::Hello)
Q_DECLARE_METATYPE(lathe::protocol::Metrics)
Q_DECLARE_METATYPE(lathe::protocol::Status)
Q_DECLARE_METATYPE(lathe::protocol::CheckpointSaved)
Q_DECLARE_METATYPE(lathe::protocol::Samples)

// Apple-only lines (listed in docs/SDK.md under "Compiled only on Apple"): SwiftUI draws what
// `UpshiftPresenter` decides and calls its actions; no rule lives here.
#if canImport(SwiftUI)
    import SwiftUI

    extension View {
        /// The update screens of `presenter`: an alert for a soft prompt, a full-screen cover for a blocking
        /// screen (a sheet on macOS), a sheet for What's New.
        public func upshiftPrompts(_ presenter: UpshiftPresenter) -> some View {
            modifier(UpshiftPrompts(presenter: presenter))
        }
    }

    struct UpshiftPrompts: ViewModifier {
        let presenter: UpshiftPresenter
        @Environment(\.openURL) private var openURL

        func body(content: Content) -> some View {
            content
                .alert(presenter.strings.softTitle, isPresented: shows(\.softPrompt), presenting: presenter.presentation.softPrompt) {
                    prompt in
                    Button(presenter.strings.update) { Task { await update() } }
                    if prompt.allowSkip {
                        Button(presenter.strings.skip) { Task { await presenter.skip() } }
                    }
                    Button(presenter.strings.later, role: .cancel) { Task { await presenter.later() } }
                } message: { prompt in
                    Text(presenter.strings.fill(presenter.strings.softMessage, version: prompt.targetVersion))
                }
                .blockingCover(isPresented: shows(\.blockingScreen)) {
                    if let prompt = presenter.presentation.blockingScreen {
                        BlockingScreen(prompt: prompt, strings: presenter.strings) { Task { await update() } }
                    }
                }
                .sheet(isPresented: shows(\.whatsNew), onDismiss: { Task { await presenter.whatsNewDismissed() } }) {
                    WhatsNewSheet(notes: presenter.presentation.whatsNew ?? [], strings: presenter.strings) {
                        Task { await presenter.whatsNewDismissed() }
                    }
                }
        }

        private func update() async {
            if let url = await presenter.update() { openURL(url) }
        }

        /// Shown while the presentation is of that kind. SwiftUI's own write of `false` (a swipe-down, a
        /// system dismissal, the close around an alert button's action) tells the presenter
        /// (``UpshiftPresenter/dismissed()``), which records it once and does not show it again until it
        /// says so.
        private func shows<Value>(_ part: KeyPath<UpdatePresentation, Value?>) -> Binding<Bool> {
            let presenter = presenter
            return Binding(
                get: { presenter.presentation[keyPath: part] != nil },
                set: { shown in
                    if !shown { Task { @MainActor in await presenter.dismissed() } }
                })
        }
    }

    struct BlockingScreen: View {
        let prompt: UpdatePrompt
        let strings: UpshiftStrings
        let update: () -> Void

        var body: some View {
            VStack(spacing: 16) {
                Text(strings.blockingTitle).font(.title2).bold()
                Text(strings.fill(strings.blockingMessage, version: prompt.targetVersion)).multilineTextAlignment(.center)
                Button(strings.update, action: update).buttonStyle(.borderedProminent)
            }
            .padding()
            .interactiveDismissDisabled()
        }
    }

    struct WhatsNewSheet: View {
        let notes: [VersionNotes]
        let strings: UpshiftStrings
        let done: () -> Void

        var body: some View {
            NavigationStack {
                List(notes, id: \.version) { release in
                    Section(release.version) {
                        ForEach(release.notes, id: \.self) { Text($0) }
                    }
                }
                .navigationTitle(strings.whatsNewTitle)
                .toolbar { Button(strings.done, action: done) }
            }
        }
    }

    extension View {
        @ViewBuilder
        fileprivate func blockingCover<Cover: View>(isPresented: Binding<Bool>, @ViewBuilder cover: @escaping () -> Cover) -> some View {
            #if os(macOS)
                sheet(isPresented: isPresented, content: cover)
            #else
                fullScreenCover(isPresented: isPresented, content: cover)
            #endif
        }
    }
#endif
